"""What every web search service shares (SerpAPI, SearXNG): the results it lists are pages on
the open web, read through the guarded fetcher.

    WebSearch.read(result)     the page as a Source, None, or PageFault (core.search.web)
    WebSearch.refuses(url)     why the page would be refused before any request, or None
    listed(items, make, k)     the first k distinct results made from a service's answer

A service subclasses `WebSearch` and implements `search`: its request, and its errors as
signals. What it does not do: fetch or cache pages (core.search.web, core.search.cache).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from core.models import SearchResult, Source
from core.search.addresses import AllowList
from core.search.guard import refused_unasked
from core.search.web import fetch_page, read_listed

Fetcher = Callable[[str], Source]


class WebSearch:
    """A search service whose results are web pages, read with `fetcher` (default: a
    throwaway guarded fetch of each page)."""

    name: str

    def __init__(self, fetcher: Fetcher | None = None) -> None:
        self._fetch = fetcher or fetch_page

    def read(self, result: SearchResult) -> Source | None:
        """The page as a Source, or None, or PageFault (core.search.web.read_listed): a page
        that failed for a passing reason is read again, never taken for one without text."""
        return read_listed(self._fetch, result.url)

    def refuses(self, url: str) -> str | None:
        """Why the page of a result would be refused before any request (a scheme other
        than http(s), a forbidden IP literal, localhost), or None: such a result is never
        offered to choose from (core.researcher)."""
        check = getattr(self._fetch, "refuses", None)
        if callable(check):
            return check(url)
        # `fetch_page` allows no host that is not public; another fetcher's rules are its own.
        return refused_unasked(url, AllowList.parse(None)) if self._fetch is fetch_page else None


def listed(items: Iterable[Any], make: Callable[[Any, int], SearchResult | None],
           k: int) -> list[SearchResult]:
    """The first `k` (at least one) distinct results `make(item, rank)` makes of a service's
    items, ranked from 1 in the order given; an item it cannot make a result of is skipped."""
    results: list[SearchResult] = []
    for item in items:
        hit = make(item, len(results) + 1)
        if hit is None or any(r.url == hit.url for r in results):
            continue
        results.append(hit)
        if len(results) >= max(k, 1):
            break
    return results
