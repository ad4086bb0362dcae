"""One runtime per process: everything built from RunConfigs, held in one place, closed once.

    rt = current()                 the process's Runtime (tests: `reset()` starts a fresh one)
    rt.engine(config)              the research engine: offline, or metered LLM engines per role
    rt.search(config)              the search backend: the corpus, or SerpAPI behind its cache
    rt.limits(config)              context windows: table, overrides, learned, remembered
    rt.store(target)               the ResultStore of a target (its schema ensured once)
    rt.pages(target)               the web cache (pages, searches) of a target
    rt.ledger(target)              running spend and the durable usage records of a target
    rt.memo(config)                the call memo of a config's store (core.accounting.memo), per refresh salt
    rt.prices(spec)                a price table
    rt.gate(provider, per_minute)  the pacing of one provider, shared by every worker
    rt.estimator()                 token estimates, calibrated by what providers report
    rt.losable()                   a Dask worker: memos write what waits before each call
    rt.look_again()                memos read the store afresh (a lost worker's task rerun)
    rt.shared(kind, key, build)    anything else a process must hold once (a corpus index)
    rt.usage(target, run_id, ...)  what a run (or one topic of it) has spent, ledgers flushed
    rt.close()                     flush every ledger, release store connections, forget all

Every object is built on first use from a RunConfig (`core.settings`), never from the
environment, under one key shape: (kind, the fields that decide it). API keys are the one thing
read from the environment, when a client is built (`core.settings.api_key`): never part of a
RunConfig. Every billed service is wrapped in `core.accounting.metering`, so each call is paced,
budgeted and recorded in the usage ledger of the run's store.

What stays per process and not here: what providers taught about request shapes
(`core.llm.quirks`), the store's pools of open connections (`core.store.connection` and
`core.store.lake`), which `close()` releases, and a running batch's topic slots
(`flows.slots`), which live only while the batch runs.
"""

from __future__ import annotations

import atexit
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Hashable, TypeVar

from core.engine.base import ResearchEngine
from core.accounting.ledger import Ledger
from core.accounting.memo import CallMemo
from core.overflow.windows import ContextLimits
from core.overflow.tokens import TokenEstimator
from core.accounting.pacing import ProviderGate
from core.accounting.prices import PriceTable
from core.search.base import SearchBackend
from core.settings import RunConfig
from core.accounting.usage import UsageTotals

log = logging.getLogger("researchflow.runtime")
T = TypeVar("T")

LEDGER_BATCH_SECONDS = 0.5  # usage records reach the store within half a second, in batches


def _target(target: str | Path) -> str:
    """A store target as a key: a lake spec as given, a file by its resolved path."""
    text = str(target)
    return text if text.startswith("ducklake:") else str(Path(text).expanduser().resolve())


class Runtime:
    """Builds and holds what RunConfigs name. Safe to share between the threads of a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[tuple[str, Hashable], Any] = {}
        self._closed = False
        self._losable = False  # see losable()

    def shared(self, kind: str, key: Hashable, build: Callable[[], T]) -> T:
        """The object of `kind` for `key`, built on first use (outside the lock: building may
        read a store or ask for other objects; when two threads race, the first one wins)."""
        with self._lock:
            found = self._built.get((kind, key))
        if found is not None:
            return found
        made = build()
        with self._lock:
            return self._built.setdefault((kind, key), made)

    def built(self, kind: str) -> list[Any]:
        """Every object of `kind` built so far (benches read their counters)."""
        with self._lock:
            return [obj for (k, _), obj in self._built.items() if k == kind]

    # -- stores -------------------------------------------------------------------------------
    def store(self, target: str | Path, config: RunConfig | None = None) -> Any:
        """The ResultStore of a target; `config` supplies how long a write waits for a lock."""
        from core.store import ResultStore

        options = {} if config is None else dict(
            lock_timeout=config.store_lock_timeout, hold_seconds=config.store_hold_seconds,
            data_path=config.lake_data_path)
        return self.shared("store", _target(target),
                           lambda: ResultStore(_target(target), **options))

    def pages(self, target: str | Path) -> Any:
        from core.store.pages import PageStore

        return self.shared("pages", _target(target), lambda: PageStore(_target(target)))

    def ledger(self, target: str | Path) -> Ledger:
        return self.shared("ledger", _target(target), lambda: Ledger(
            self.store(target), batch_seconds=LEDGER_BATCH_SECONDS))

    def memo(self, config: RunConfig) -> CallMemo:
        """The call memo of the config's store: one per (store, expiry, refresh salt), so every
        billed backend a config builds shares it."""
        key = (_target(config.db_path), config.memo_ttl_hours, config.refresh)

        def build() -> CallMemo:
            from core.store.call_memo import MemoStore

            memo = CallMemo(MemoStore(_target(config.db_path)), ttl_hours=config.memo_ttl_hours,
                            salt=config.refresh, batch_seconds=LEDGER_BATCH_SECONDS)
            memo.write_first = self._losable
            return memo

        return self.shared("memo", key, build)

    def usage(self, target: str | Path, run_id: str, topic_id: str | None = None) -> UsageTotals:
        """A run's (or one topic's) spend from the store, after this process's records are in.
        An unreadable store answers with no totals (the caller's line says so)."""
        from core.store import StoreError

        self.flush()
        try:
            return self.store(target).usage(run_id=run_id, topic_id=topic_id)
        except StoreError as exc:
            log.warning("usage unavailable: %s", exc)
            return UsageTotals(unknown=str(exc))

    def fallback_roles(self, config: RunConfig, topic_id: str | None) -> str:
        """The roles of a topic the extractive engine answered for the model (core.engine.
        fallback), from the ledger of every run of it; "" for none, or for the offline engine."""
        from core.store import StoreError

        if config.model == "offline" or topic_id is None:
            return ""
        self.flush()
        try:
            return self.store(config.db_path).usage(topic_id=topic_id).fallback_roles
        except StoreError as exc:
            log.warning("fallbacks unavailable: %s", exc)
            return ""

    # -- what calls are made with -------------------------------------------------------------
    def prices(self, spec: str | None) -> PriceTable:
        return self.shared("prices", spec, lambda: PriceTable(spec))

    def gate(self, provider: str, calls_per_minute: int | None = None) -> ProviderGate:
        """One gate per provider; its per-minute cap follows the latest configuration."""
        gate = self.shared("gate", provider, lambda: ProviderGate(calls_per_minute))
        gate.calls_per_minute = calls_per_minute
        return gate

    def estimator(self) -> TokenEstimator:
        """Token estimates, calibrated by every provider's reported usage under this runtime
        (a fresh runtime starts uncalibrated, as a fresh process does: a rerun in a new process
        cuts a page into the same pieces as a rerun after `reset()`)."""
        return self.shared("estimator", None, TokenEstimator)

    def limits(self, config: RunConfig) -> ContextLimits:
        """One limits registry per window configuration and store: every task of the process
        shares what an error taught, and the store remembers it for the next run."""
        key = (config.context_windows, config.default_context_window, _target(config.db_path))
        return self.shared("limits", key, lambda: self._build_limits(config))

    def _build_limits(self, config: RunConfig) -> ContextLimits:
        from core.store import StoreError

        store = self.store(config.db_path, config)
        try:
            remembered = store.learned_limits()
        except StoreError as exc:
            log.warning("could not read remembered model limits (%s); starting without", exc)
            remembered = {}
        return ContextLimits(dict(config.context_windows), default=config.default_context_window,
                             remembered=remembered,
                             on_learn=lambda model, taught: store.remember_limits(model,
                                                                                  **taught))

    # -- engines and searches -----------------------------------------------------------------
    def engine(self, config: RunConfig) -> ResearchEngine:
        return self.shared("engine", config, lambda: self._build_engine(config))

    def _build_engine(self, config: RunConfig) -> ResearchEngine:
        if config.model == "offline":
            from core.engine.offline.extractive import ExtractiveEngine

            if config.search != "corpus":  # a web search costs: the plan reads the topic alone
                return ExtractiveEngine()

            def search(query: str, k: int) -> list:  # the outline is drawn from the corpus
                return self.search(config).search(query, k)

            return ExtractiveEngine(search=search)
        from core.engine.model_driven.llm_engine import LLMEngine
        from core.llm.registry import make_model
        from core.accounting.metering import MeteredModel

        estimator = self.estimator()

        def engine_for(spec: str) -> LLMEngine:
            model = make_model(spec, config)
            self._window_from_server(model, self.limits(config))
            metered = MeteredModel(model, self.ledger(config.db_path), self.prices(config.prices),
                                   self.gate(model.provider, config.max_calls_per_minute),
                                   estimator=estimator, memo=self.memo(config))
            return LLMEngine(metered, limits=self.limits(config), estimator=estimator,
                             max_output_tokens=config.max_output_tokens,
                             spill_dir=Path(config.cache_dir) / "spill")

        engine: Any = engine_for(config.model)
        if config.role_models:
            from core.engine.model_driven.routed import RoutedEngine

            specs = dict(config.role_models)
            built = {spec: engine_for(spec) for spec in set(specs.values())}
            engine = RoutedEngine(engine, {role: built[spec] for role, spec in specs.items()})
        return self._with_fallback(engine, config)

    def _with_fallback(self, engine: Any, config: RunConfig) -> ResearchEngine:
        """The model's engine with the extractive engine behind each role (core.engine.fallback);
        each fallback is a 'fallback' row of the topic's usage ledger."""
        from core.engine.fallback import FallbackEngine
        from core.engine.offline.extractive import ExtractiveEngine

        ledger = self.ledger(config.db_path)
        offline = self._build_engine(config.model_copy(update={"model": "offline",
                                                               "role_models": ()}))

        def record(role: str, signal: Any) -> None:
            from core.accounting.ledger import fallback_record

            ledger.record(fallback_record(role, str(signal)))

        assert isinstance(offline, ExtractiveEngine)
        return FallbackEngine(engine, offline, policy=config.fallback, on_fallback=record)

    @staticmethod
    def _window_from_server(model: Any, limits: ContextLimits) -> None:
        """Before a compatible server's model is first called, ask the server its window when
        nothing better than the default is known (no override, table entry or learned limit)."""
        base_url = getattr(model, "base_url", None)
        if model.provider != "openai-compatible" or not base_url or limits.known(model.model):
            return
        from core.llm.discovery import discover_window

        found = discover_window(base_url, model.model, api_key=getattr(model, "api_key", None))
        if found is not None:
            limits.teach_window(model.model, found.tokens, found.source)

    def search(self, config: RunConfig) -> SearchBackend:
        # One backend whatever the model: the model's fields are not part of its key.
        key = config.model_copy(update={"model": "-", "role_models": ()})
        return self.shared("search", key, lambda: self._build_search(config))

    def _build_search(self, config: RunConfig) -> SearchBackend:
        from core.search.registry import corpus_location, make_search

        if config.search == "corpus":  # one instance per index file (DuckDB wants one config)
            corpus_dir, index = corpus_location(config)
            return self.shared("corpus", str(index), lambda: make_search(config))
        backend = make_search(config, pages=self.pages(config.db_path))
        if config.search in ("serpapi", "searxng"):  # a web search service: a row per search
            from core.accounting.metering import MeteredSearch
            from core.search.cache import CachedSearch

            params = backend.params
            backend = MeteredSearch(backend, self.ledger(config.db_path),
                                    self.prices(config.prices),
                                    self.gate(config.search, config.max_calls_per_minute),
                                    provider=config.search, memo=self.memo(config))
            # Outside the meter: a search served from the cache is not billed, nor recorded.
            backend = CachedSearch(backend, self.pages(config.db_path),
                                   ttl_hours=config.page_ttl_hours, params=params)
        return backend

    # -- the end ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every usage record and memo answer still waiting (batched, or kept back by a
        locked store)."""
        for memo in self.built("memo"):
            memo.flush()
        for ledger in self.built("ledger"):
            ledger.flush()

    def losable(self) -> None:
        """This process may be killed mid-run and its tasks run again elsewhere (a Dask worker:
        flows/attempts.py): every call memo writes what waits before a new call leaves."""
        self._losable = True
        for memo in self.built("memo"):
            memo.write_first = True

    def look_again(self) -> None:
        """Every call memo reads the store afresh on its next miss (a task run again after
        its worker was lost: flows/attempts.py)."""
        for memo in self.built("memo"):
            memo.look_again()

    def close(self) -> None:
        """Flush the ledgers, close what holds files, release the store's connections."""
        self.flush()
        for corpus in self.built("corpus"):
            close = getattr(corpus, "close", None)
            if callable(close):
                close()
        with self._lock:
            self._built.clear()
            self._closed = True
        from core.store.connection import release_all
        from core.store.lake import close_all

        release_all()
        close_all()


_current: Runtime | None = None
_current_lock = threading.Lock()


def current() -> Runtime:
    """The process's runtime, made on first use."""
    global _current
    with _current_lock:
        if _current is None:
            _current = Runtime()
        return _current


def reset() -> Runtime:
    """Close the process's runtime (flushing what it holds) and start a fresh one (tests, or a
    long-lived process whose configuration changed)."""
    global _current
    with _current_lock:
        old, _current = _current, Runtime()
        fresh = _current
    if old is not None:
        old.close()
    return fresh


@atexit.register
def _close_at_exit() -> None:
    """Before the process ends: what waits in a batch is written, and every DuckDB file is
    closed while the interpreter is whole (a connection left to the interpreter's teardown,
    such as a corpus index's, is destroyed in no set order, beside DuckDB's own threads)."""
    with _current_lock:
        rt = _current
    if rt is not None:
        rt.close()

