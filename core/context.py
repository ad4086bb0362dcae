"""What one run works with, built once from its RunConfig: the run context.

A task receives a RunConfig (Prefect's cache key hashes it) and works with what the config names:
its store, its ledger and call memo, its model limits and token estimates, a gate per provider,
its search backend and its engine. `build(config)` makes all of them, each from the ones before
it, in the one order below; nothing reaches back for a part after it is built, and nothing is
read from the environment but API keys, where a client is built (core.settings.api_key). The
builder may hand two parts in: where keys are read (`keys`: a Prefect Secret block besides the
environment, tasks/secret_blocks.py) and what makes a provider's gate (`gates`: limits held by
a Prefect server for every process, tasks/shared_pacing.py); core knows neither:

    store, pages        the results store and the web cache of config.db_path
    ledger, memo        who pays for a call, and the answers no call pays for twice
    billing             prices, token estimates and a gate per provider, with the two above:
                        what meters every billed call (core.accounting.metering)
    limits              context windows: table, overrides, learned, remembered in the store
    search              the corpus, or a web search behind its meter and page cache
                        (core.search.registry.search_for)
    engine, fallback    the extractive engine, or the model's engines (one per role, behind the
                        meter: core.engine.model_driven.engines) with the extractive engine
                        behind each role (core.engine.fallback)

`close()` writes what waits (usage records, memo answers) and closes what holds a file. Which
process keeps which contexts is not decided here: tasks/contexts.py keeps one per RunConfig.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from core.accounting.ledger import Ledger
from core.accounting.memo import CallMemo
from core.accounting.metering import Billing
from core.accounting.pacing import Gate, GateMaker
from core.accounting.prices import PriceTable
from core.accounting.usage import UsageTotals
from core.engine.base import ResearchEngine
from core.engine.fallback import FallbackEngine
from core.engine.model_driven.engines import model_engine
from core.engine.offline.extractive import ExtractiveEngine
from core.overflow.tokens import TokenEstimator
from core.overflow.windows import ContextLimits
from core.search.base import SearchBackend
from core.search.corpus import CorpusSearch
from core.search.registry import search_for, vocabulary_of
from core.settings import EnvironmentKeys, RunConfig
from core.store import PageStore, ResultStore, StoreError
from core.store.call_memo import MemoStore

log = logging.getLogger("researchflow.context")

BATCH_SECONDS = 0.5  # usage records and memo answers reach the store within half a second


@dataclass(frozen=True)
class RunContext:
    """Everything one RunConfig names, built by `build`. Safe to share between threads."""

    config: RunConfig
    store: ResultStore
    pages: PageStore
    ledger: Ledger
    memo: CallMemo
    prices: PriceTable
    estimator: TokenEstimator
    limits: ContextLimits
    gates: dict[str, Gate]
    search: SearchBackend
    engine: ResearchEngine
    fallback: FallbackEngine | None  # the engine itself, when a model's roles may fall back

    def flush(self) -> None:
        """Write the usage records and memo answers still waiting."""
        self.memo.flush()
        self.ledger.flush()

    def usage(self, run_id: str | None, topic_id: str | None = None) -> UsageTotals:
        """A run's (or one topic's: of every run, without `run_id`) spend from the store, once
        this context's records are in; an unreadable store answers with no totals (the
        caller's line says so)."""
        self.flush()
        try:
            return self.store.usage(run_id=run_id, topic_id=topic_id)
        except StoreError as exc:
            log.warning("usage unavailable: %s", exc)
            return UsageTotals(unknown=str(exc))

    def fallback_roles(self, topic_id: str | None) -> str:
        """The roles of a topic the extractive engine answered for the model, from the ledger of
        every run of it; "" for none, or without a model."""
        if self.fallback is None or topic_id is None:
            return ""
        return self.usage(None, topic_id).fallback_roles

    def close(self) -> None:
        """A last write of what waits, and the corpus index closed."""
        self.memo.close()
        self.ledger.close()
        if isinstance(self.search, CorpusSearch):
            self.search.close()


def build(config: RunConfig, *, losable: bool = False, keys: EnvironmentKeys | None = None,
          gates: GateMaker | None = None) -> RunContext:
    """Everything `config` names, each part from the ones before it. `losable`: this process
    may be killed mid-call (a Dask worker), so the memo writes what waits before each call.
    `keys`: where clients read their keys (default: the environment); `gates`: what makes a
    provider's gate (default: this process's own, core.accounting.pacing.ProviderGate)."""
    store = ResultStore(config.db_path, lock_timeout=config.store_lock_timeout,
                        hold_seconds=config.store_hold_seconds, data_path=config.lake_data_path)
    pages = PageStore(config.db_path, hold_seconds=config.store_hold_seconds)
    ledger = Ledger(store, batch_seconds=BATCH_SECONDS)
    memo = CallMemo(MemoStore(config.db_path, hold_seconds=config.store_hold_seconds),
                    ttl_hours=config.memo_ttl_hours, salt=config.refresh,
                    batch_seconds=BATCH_SECONDS)
    memo.write_first = losable
    # A run's own estimator: another run's calibration never moves its page cuts.
    billing = Billing(ledger, PriceTable(config.prices), memo, TokenEstimator(),
                      calls_per_minute=config.max_calls_per_minute,
                      tokens_per_minute=config.max_tokens_per_minute, gates=gates)
    limits = ContextLimits.kept_in(store, dict(config.context_windows),
                                   config.default_context_window)
    search = search_for(config, pages, billing, keys)
    # What the corpus says of a topic's words (a web search knows no vocabulary).
    offline = ExtractiveEngine(vocabulary=vocabulary_of(search))
    fallback = None if config.model == "offline" else FallbackEngine(
        model_engine(config, limits, billing, keys), offline, policy=config.fallback,
        on_fallback=ledger.record_fallback)
    return RunContext(config=config, store=store, pages=pages, ledger=ledger, memo=memo,
                      prices=billing.prices, estimator=billing.estimator, limits=limits,
                      gates=billing.gates, search=search, engine=fallback or offline,
                      fallback=fallback)
