"""A billed search behind the meter: each search is a ledger row priced per call, waits at its
provider's gate, fits the budget, and is served from the call memo when it was asked before (in
this edition); reading a result's page is free (core.accounting.metering does the same for a
model's calls).

What it does not do: cache pages or search results (core.search.cache wraps it, outside the
meter: a search served from that cache is neither billed nor recorded).
"""

from __future__ import annotations

import time
from typing import Any

from core.accounting.ledger import Ledger
from core.accounting.memo import CallMemo, results_answer, results_from
from core.accounting.metering import Meter
from core.accounting.pacing import Gate
from core.accounting.prices import PriceTable
from core.models import SearchResult, Source
from core.search.base import SearchBackend
from core.signals import Signal


class MeteredSearch:
    """A billed `SearchBackend`: each search is a ledger row priced per call; reads are free."""

    def __init__(self, inner: SearchBackend, ledger: Ledger, prices: PriceTable,
                 gate: Gate, *, provider: str = "serpapi",
                 memo: CallMemo | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.provider = provider
        self.meter = Meter(ledger, prices, gate)
        self.memo = memo if memo is not None and memo.enabled else None

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        key = None
        if self.memo is not None:
            key = self.memo.key("search", {
                "provider": self.provider, "name": self.name, "query": query, "k": k,
                "params": getattr(self.inner, "params", None),
                "base_url": getattr(self.inner, "base_url", None)})
            found = self.memo.answer(key)
            served = results_from(found) if found is not None else None
            if served is not None:
                self.meter.served(provider=self.provider, model=self.provider, role="search")
                self.memo.note_served()
                return served
            self.memo.write_waiting()
        results = self._search(query, k)
        if key is not None:
            self.memo.keep(key, results_answer(results), kind="search",  # type: ignore
                           provider=self.provider, model=self.provider, role="search")
        return results

    def _search(self, query: str, k: int) -> list[SearchResult]:
        with self.meter.held(self.provider, "search"):
            started = time.monotonic()
            try:
                results = self.inner.search(query, k=k)
            except Signal as exc:
                self.meter.after_failure(exc, provider=self.provider, model=self.provider,
                                         role="search", started=started)
                raise
            self.meter.after_success(provider=self.provider, model=self.provider,
                                     role="search", started=started)
        return results

    def read(self, result: SearchResult) -> Source | None:
        return self.inner.read(result)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
