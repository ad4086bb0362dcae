"""Build (once per process) the engine, search backend, limits and ledger a RunConfig names.

Tasks call these factories instead of receiving live clients: clients are not hashable or
picklable, and keys must stay out of task inputs. API keys are read from the environment here,
at call time, never from the RunConfig. Every billed service is wrapped in `core.metering`, so
each call is paced, budgeted and recorded in the usage ledger of the run's DuckDB file.
"""

from __future__ import annotations

import atexit
import logging
import threading
from pathlib import Path

from core.engine.base import ResearchEngine
from core.engine.extractive import ExtractiveEngine
from core.ledger import Ledger
from core.overflow.limits import ContextLimits
from core.pacing import gate_for, reset_gates
from core.prices import PriceTable
from core.search.base import SearchBackend
from core.settings import RunConfig, Settings

log = logging.getLogger("researchflow.runtime")
_lock = threading.Lock()
_engines: dict[RunConfig, ResearchEngine] = {}
_searches: dict[RunConfig, SearchBackend] = {}
_limits: dict[tuple, ContextLimits] = {}
_ledgers: dict[str, Ledger] = {}
_prices: dict[str | None, PriceTable] = {}


def _settings(config: RunConfig) -> Settings:
    return Settings.load(model=config.model, search=config.search,
                         corpus_dir=Path(config.corpus_dir) if config.corpus_dir else None,
                         cache_dir=Path(config.cache_dir), db_path=Path(config.db_path),
                         results_per_query=config.results_per_query,
                         max_output_tokens=config.max_output_tokens,
                         default_context_window=config.default_context_window,
                         context_windows=dict(config.context_windows),
                         searxng_url=config.searxng_url)


def context_limits(config: RunConfig) -> ContextLimits:
    """One limits registry per process, configuration and store: every task of the process
    shares what an error taught, and the store remembers it for the next run."""
    key = (config.context_windows, config.default_context_window, config.db_path)
    with _lock:
        limits = _limits.get(key)
    if limits is None:
        from core.store import ResultStore, StoreError

        store = ResultStore(Path(config.db_path))
        try:
            remembered = store.learned_limits()
        except StoreError as exc:
            log.warning("could not read remembered model limits (%s); starting without", exc)
            remembered = {}
        limits = ContextLimits(dict(config.context_windows), default=config.default_context_window,
                               remembered=remembered,
                               on_learn=lambda model, taught: store.remember_limits(model,
                                                                                    **taught))
        with _lock:
            limits = _limits.setdefault(key, limits)
    return limits


LEDGER_BATCH_SECONDS = 0.5


def ledger_for(db_path: str | Path) -> Ledger:
    """The process's ledger for one DuckDB file (running spend is kept per file)."""
    from core.store import ResultStore

    key = str(Path(db_path).expanduser().resolve())
    with _lock:
        ledger = _ledgers.get(key)
    if ledger is None:
        # Records reach the store within half a second, a batch at a time (see Ledger).
        ledger = Ledger(ResultStore(Path(key)), batch_seconds=LEDGER_BATCH_SECONDS)
        with _lock:
            ledger = _ledgers.setdefault(key, ledger)
    return ledger


def price_table(settings: Settings) -> PriceTable:
    with _lock:
        if settings.prices not in _prices:
            _prices[settings.prices] = PriceTable(settings.prices)
        return _prices[settings.prices]


def build_engine(config: RunConfig) -> ResearchEngine:
    with _lock:
        engine = _engines.get(config)
    if engine is not None:
        return engine
    if config.model == "offline":
        engine = ExtractiveEngine()
    else:
        from core.engine.llm import LLMEngine
        from core.llm.registry import make_model
        from core.metering import MeteredModel

        settings = _settings(config)

        def engine_for(spec: str) -> LLMEngine:
            model = make_model(spec, settings)
            metered = MeteredModel(model, ledger_for(config.db_path), price_table(settings),
                                   gate_for(model.provider, settings.max_calls_per_minute))
            return LLMEngine(metered, limits=context_limits(config),
                             max_output_tokens=config.max_output_tokens,
                             spill_dir=Path(config.cache_dir) / "spill")

        engine = engine_for(config.model)
        if config.role_models:
            from core.engine.routed import RoutedEngine

            specs = dict(config.role_models)
            built = {spec: engine_for(spec) for spec in set(specs.values())}
            engine = RoutedEngine(engine, {role: built[spec] for role, spec in specs.items()})
    with _lock:
        return _engines.setdefault(config, engine)


def build_search(config: RunConfig) -> SearchBackend:
    from core.search.registry import make_search

    search_key = config.model_copy(update={"model": "-"})  # one backend whatever the model
    with _lock:
        backend = _searches.get(search_key)
    if backend is None:
        settings = _settings(config)
        backend = make_search(settings)
        kind = settings.resolved_search()
        if kind in ("serpapi", "searxng"):  # a web search service: a ledger row per search
            from core.metering import MeteredSearch
            from core.search.cache import CachedSearch
            from core.search.registry import page_store

            params = backend.params
            backend = MeteredSearch(backend, ledger_for(config.db_path), price_table(settings),
                                    gate_for(kind, settings.max_calls_per_minute),
                                    provider=kind)
            # Outside the meter: a search served from the cache is not billed, nor recorded.
            backend = CachedSearch(backend, page_store(settings),
                                   ttl_hours=settings.page_ttl_hours, params=params)
        with _lock:
            backend = _searches.setdefault(search_key, backend)
    return backend


@atexit.register  # what waits in a batch is written before the process ends
def flush_ledgers() -> None:
    """Write any usage records still waiting (batched, or kept back by a locked store)."""
    with _lock:
        ledgers = list(_ledgers.values())
    for ledger in ledgers:
        ledger.flush()


def reset() -> None:
    """Forget built clients (tests, or after settings change in a long-lived process)."""
    with _lock:
        _engines.clear()
        _searches.clear()
        _limits.clear()
        _ledgers.clear()
        _prices.clear()
    reset_gates()
