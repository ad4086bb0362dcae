"""One fetch per page and one search per query, across sub-questions, topics and runs.

    CachedFetcher(fetch, store, ttl_hours=, key=)     a fetcher (url -> Source) in front of
                                                      another, remembering pages in `pages`
    CachedSearch(backend, store, ttl_hours=, params=) a SearchBackend in front of another,
                                                      remembering results in `searches`

Both keep entries in a `PageStore` (the DuckDB store file, so later runs reuse them) for
`ttl_hours` (Settings.page_ttl_hours), and both are single-flight inside a process: threads that
ask for the same key at the same moment wait for one fetch (or search) and share its answer, so
two sub-questions that find the same page in parallel download it once. ttl_hours == 0 (or
store None) is a pass-through: no reads, no writes, no waiting on each other.

CachedFetcher:
  * the key of a URL is `key(url)`, by default core.search.urls.normalize_url; the Source it
    returns has url = that key (with or without the cache), so one page is one source everywhere;
    the page is fetched at the URL the caller gave, and the URL it ended at after redirects is
    kept as pages.final_url;
  * a refusal (PageRefused) is cached for the TTL; a cached one is raised again (a subclass
    becomes PageRefused) with the same reason, for the URL asked, and the page is not fetched;
  * an unavailable page (PageUnavailable: network, timeout, 5xx, 429) is never remembered: it
    may pass, so the next ask fetches again (threads asking at the same moment still share one
    fetch), and an entry an older version stored is read as a miss;
  * any other exception from the fetch is not cached and reaches the caller (threads that were
    waiting on it try again themselves);
  * bytes: what the fetch downloaded. `fetch` may return `(Source, bytes_downloaded)` to say it;
    when it returns a plain Source, len(source.text.encode()) stands in (the extracted text,
    smaller than the HTML that was downloaded). Refusals count 0.
  * counters for a bench: fetches (real fetch calls), hits (answers without a fetch, a thread
    that shared another's fetch included), bytes_fetched, bytes_saved (bytes of those hits).

Editions (core.reports.editions): inside `checking_pages(edition)` a page stored before is
checked once per edition and process: with a conditional request when the server gave an ETag or
a Last-Modified (a 304 keeps the stored text, counted as `revalidated`), else fetched again; a
page older than the TTL is checked the same way instead of being fetched blind.

CachedSearch:
  * the key is a sha256 of the backend's name, `params` (engine, location, language, country:
    whatever changes the answer besides the query), the normalised query (whitespace collapsed,
    casefolded) and k; empty results are an answer and cached too; an exception is not;
  * `read` and `name` (and any other attribute) are the backend's;
  * counters: searches (real backend calls), hits.

A store that is locked or unwritable never fails a fetch or a search: PageStore answers a miss,
drops the write and logs (see core.store.pages).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from core.models import SearchResult, Source
from core.search.base import SearchBackend
from core.search.web import NotModified, PageRefused, PageUnavailable, Validators
from core.store.pages import PageRecord, PageStore

_EDITION: ContextVar[str] = ContextVar("researchflow_page_edition", default="")


@contextmanager
def checking_pages(edition: str) -> Iterator[None]:
    """Pages read inside are checked again once in `edition` (see the module docstring)."""
    token = _EDITION.set(edition)
    try:
        yield
    finally:
        _EDITION.reset(token)

_T = TypeVar("_T")

Fetch = Callable[[str], "Source | tuple[Source, int]"]


# -- single flight ------------------------------------------------------------------------------

@dataclass
class _Flight(Generic[_T]):
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    value: Any = None


class _SingleFlight(Generic[_T]):
    """Per-key: the first caller runs fn, callers that arrive meanwhile wait and share its
    value. If fn raises, the exception reaches the first caller only; the others retry."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._flights: dict[str, _Flight[_T]] = {}

    def run(self, key: str, fn: Callable[[], _T]) -> tuple[_T, bool]:
        """(value, shared): shared is True when another thread's call produced the value."""
        while True:
            with self._guard:
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = _Flight()
                    break
            flight.done.wait()
            if flight.ok:
                return flight.value, True
        try:
            flight.value = fn()
            flight.ok = True
            return flight.value, False
        finally:
            with self._guard:
                del self._flights[key]
            flight.done.set()


class _Counters:
    def __init__(self, *names: str) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(names, 0)

    def add(self, **amounts: int) -> None:
        with self._lock:
            for name, amount in amounts.items():
                self._values[name] += amount

    def get(self, name: str) -> int:
        with self._lock:
            return self._values[name]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)


# -- pages --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Outcome:
    """What a key resolved to: a Source (and the URL it ended at), or a refusal (its class and
    reason); and the bytes it took."""

    source: Source | None = None
    final_url: str | None = None
    refusal: type[PageRefused] | None = None
    reason: str | None = None
    bytes: int = 0
    validators: Validators = Validators()
    retry_after: float | None = None  # an unavailable page's Retry-After
    passing: bool = True  # an unavailable page that may come back


def _default_key() -> Callable[[str], str]:
    from core.search.urls import normalize_url  # written alongside; imported when first needed
    return normalize_url


class CachedFetcher:
    """`(url) -> Source` like core.search.web.fetch_page, one fetch per key (module docstring)."""

    def __init__(self, fetch: Fetch, store: PageStore | None, *, ttl_hours: float,
                 key: Callable[[str], str] | None = None) -> None:
        if ttl_hours < 0:
            raise ValueError(f"ttl_hours must be >= 0, not {ttl_hours}")
        self._fetch = fetch
        self._store = store
        self.ttl_hours = ttl_hours
        self._key = key or _default_key()
        self._flights: _SingleFlight[_Outcome] = _SingleFlight()
        self._counters = _Counters("fetches", "hits", "bytes_fetched", "bytes_saved",
                                   "revalidated")
        self._checked: set[tuple[str, str]] = set()  # (key, edition) checked in this process
        self._checked_lock = threading.Lock()

    @property
    def caching(self) -> bool:
        return self._store is not None and self.ttl_hours > 0

    @property
    def fetches(self) -> int:
        return self._counters.get("fetches")

    @property
    def hits(self) -> int:
        return self._counters.get("hits")

    @property
    def bytes_fetched(self) -> int:
        return self._counters.get("bytes_fetched")

    @property
    def bytes_saved(self) -> int:
        return self._counters.get("bytes_saved")

    @property
    def revalidated(self) -> int:
        return self._counters.get("revalidated")

    def stats(self) -> dict[str, int]:
        """fetches, hits, bytes_fetched, bytes_saved, revalidated (304s)."""
        return self._counters.snapshot()

    def refuses(self, url: str) -> str | None:
        """Why the fetcher behind would refuse `url` before any request (None: it cannot tell
        without one, or has no such check)."""
        check = getattr(self._fetch, "refuses", None)
        return check(url) if callable(check) else None

    def __call__(self, url: str) -> Source:
        key = self._key(url)
        if not self.caching:
            return self._answer(url, self._fetch_outcome(url, key))
        edition = _EDITION.get()
        outcome, shared = self._flights.run(f"{key}\0{edition}",
                                            lambda: self._resolve(url, key, edition))
        if shared:
            self._counters.add(hits=1, bytes_saved=outcome.bytes)
        return self._answer(url, outcome)

    def _resolve(self, url: str, key: str, edition: str = "") -> _Outcome:
        assert self._store is not None
        record = self._store.get_page(key, self.ttl_hours)
        if record is not None and record.status != "unavailable" and not (
                record.status == "ok" and self._unchecked(key, edition)):
            self._counters.add(hits=1, bytes_saved=record.bytes)
            return self._from_record(key, record)
        if record is None:  # past its TTL, it may still be current: ask the server
            record = self._store.get_page(key, None)
        stored = record if record is not None and record.status == "ok" else None
        outcome = self._fetch_outcome(url, key, stored)
        if outcome.refusal is not PageUnavailable:
            self._store.put_page(key, self._to_record(outcome))
            if edition:
                with self._checked_lock:
                    self._checked.add((key, edition))
        return outcome

    def _unchecked(self, key: str, edition: str) -> bool:
        """Whether a stored page is still to be checked in this edition."""
        if not edition:
            return False
        with self._checked_lock:
            return (key, edition) not in self._checked

    def _fetch_outcome(self, url: str, key: str,
                       stored: PageRecord | None = None) -> _Outcome:
        validated = getattr(self._fetch, "fetch_validated", None)
        validators = (Validators(stored.etag, stored.last_modified) if stored is not None
                      else Validators())
        found = Validators()
        try:
            if validated is not None:
                got, found = validated(url, validators or None)
            else:
                got = self._fetch(url)
        except NotModified:  # the stored text is the page's current version
            assert stored is not None
            self._counters.add(revalidated=1, bytes_saved=stored.bytes)
            return replace(self._from_record(key, stored), validators=validators)
        except PageUnavailable as exc:
            return _Outcome(refusal=PageUnavailable, reason=exc.reason,
                            retry_after=exc.retry_after, passing=exc.passing)
        except PageRefused as exc:
            return _Outcome(refusal=PageRefused, reason=exc.reason)
        finally:
            self._counters.add(fetches=1)
        source, size = got if isinstance(got, tuple) else (got, len(got.text.encode("utf-8")))
        self._counters.add(bytes_fetched=size)
        return _Outcome(Source(url=key, title=source.title, text=source.text),
                        final_url=source.url, bytes=size, validators=found)

    @staticmethod
    def _to_record(outcome: _Outcome) -> PageRecord:
        if outcome.source is not None:
            return PageRecord(status="ok", final_url=outcome.final_url, title=outcome.source.title,
                              text=outcome.source.text, bytes=outcome.bytes,
                              fetched_at=datetime.now(timezone.utc),
                              etag=outcome.validators.etag,
                              last_modified=outcome.validators.last_modified)
        status = "unavailable" if outcome.refusal is PageUnavailable else "refused"
        return PageRecord(status=status, reason=outcome.reason, bytes=outcome.bytes)

    @staticmethod
    def _from_record(key: str, record: PageRecord) -> _Outcome:
        if record.status == "ok":
            return _Outcome(Source(url=key, title=record.title or key, text=record.text or ""),
                            final_url=record.final_url, bytes=record.bytes)
        refusal = PageUnavailable if record.status == "unavailable" else PageRefused
        return _Outcome(refusal=refusal, reason=record.reason or record.status,
                        bytes=record.bytes)

    @staticmethod
    def _answer(url: str, outcome: _Outcome) -> Source:
        if outcome.source is None:
            assert outcome.refusal is not None
            if outcome.refusal is PageUnavailable:
                raise PageUnavailable(url, outcome.reason or "unavailable", outcome.retry_after,
                                      passing=outcome.passing)
            raise outcome.refusal(url, outcome.reason or "refused")
        return outcome.source


# -- searches -----------------------------------------------------------------------------------

def normalize_query(query: str) -> str:
    """Whitespace collapsed and casefolded: queries that differ only so get one search."""
    return " ".join(query.split()).casefold()


def search_key(engine: str, params: Mapping[str, Any], query: str, k: int) -> str:
    """The `searches` key of one search: a sha256 over everything that shapes its answer."""
    payload = json.dumps([engine, dict(sorted(params.items())), normalize_query(query), k],
                         sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class CachedSearch:
    """A SearchBackend whose `search` is remembered for ttl_hours (module docstring)."""

    def __init__(self, backend: SearchBackend, store: PageStore | None, *, ttl_hours: float,
                 params: Mapping[str, Any] | None = None) -> None:
        if ttl_hours < 0:
            raise ValueError(f"ttl_hours must be >= 0, not {ttl_hours}")
        self._backend = backend
        self._store = store
        self.ttl_hours = ttl_hours
        self.params = dict(params or {})
        self.name = backend.name
        self._flights: _SingleFlight[list[SearchResult]] = _SingleFlight()
        self._counters = _Counters("searches", "hits")

    def __getattr__(self, name: str) -> Any:  # anything else is the backend's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._backend, name)

    def __repr__(self) -> str:
        return f"CachedSearch({self._backend!r}, ttl_hours={self.ttl_hours})"

    @property
    def caching(self) -> bool:
        return self._store is not None and self.ttl_hours > 0

    @property
    def searches(self) -> int:
        return self._counters.get("searches")

    @property
    def hits(self) -> int:
        return self._counters.get("hits")

    def stats(self) -> dict[str, int]:
        """searches, hits."""
        return self._counters.snapshot()

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        if not self.caching or not normalize_query(query):
            return self._search(query, k)
        key = search_key(self.name, self.params, query, k)
        results, shared = self._flights.run(key, lambda: self._resolve(key, query, k))
        if shared:
            self._counters.add(hits=1)
        return list(results)

    def read(self, result: SearchResult) -> Source | None:
        return self._backend.read(result)

    def _resolve(self, key: str, query: str, k: int) -> list[SearchResult]:
        assert self._store is not None
        cached = self._store.get_search(key, self.ttl_hours)
        if cached is not None:
            self._counters.add(hits=1)
            return cached
        results = self._search(query, k)
        self._store.put_search(key, self.name, query, results)
        return results

    def _search(self, query: str, k: int) -> list[SearchResult]:
        try:
            return list(self._backend.search(query, k))
        finally:
            self._counters.add(searches=1)
