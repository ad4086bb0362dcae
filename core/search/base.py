"""The protocol every search backend implements: find results, then read one into a Source."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from core.models import SearchResult, Source


@runtime_checkable
class SearchBackend(Protocol):
    name: str

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        """Results shaped like web search hits, best first. Empty list when nothing matched."""
        ...

    def read(self, result: SearchResult) -> Source | None:
        """The full extracted text behind a result; None when it cannot be read (refused page)."""
        ...
