"""PageStore: the web cache in DuckDB, fetched pages (`pages`) and search results (`searches`).

What it does: reads an entry only while it is fresh and upserts entries, by a key the caller
computes (the normalised URL for a page, a hash for a search; core.search.cache does both). The
cache lives in the store file, so it is shared by the sub-questions, topics and runs that use it.

Freshness, per page status:

    ok            fresh for max_age_hours (the caller's TTL, Settings.page_ttl_hours)
    refused       fresh for max_age_hours too: a page that is not readable (4xx, not HTML, too
                  big, nothing to extract) stays refused, and is never fetched again in the TTL
    unavailable   fresh for min(UNAVAILABLE_TTL_HOURS, max_age_hours): a timeout, a 5xx or a 429
                  may pass, so it only spares the pages of the next hour a host that is down

What it does not do: fetch, search or normalise anything, or ever fail its caller. Like
`ResultStore` it goes through `connection.writable` (a connection held while the process
works, the same per-file lock), but a store that is locked by another process, unwritable or otherwise broken
only costs the cache: a read answers None (a miss), a write is dropped, a warning is logged once,
and the file is left alone for `retry_after` seconds before the next attempt, so a file held by
a DuckDB shell does not cost every page a lock wait.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal, TypeVar

import duckdb

from core.models import SearchResult
from core.store.backend import open_backend
from core.store.connection import HOLD_SECONDS, StoreError

log = logging.getLogger("researchflow.store.pages")

PageStatus = Literal["ok", "refused", "unavailable"]
STATUSES: tuple[str, ...] = ("ok", "refused", "unavailable")
UNAVAILABLE_TTL_HOURS = 1.0

_T = TypeVar("_T")


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class PageRecord:
    """One fetch's outcome. For 'ok': final_url (after redirects), title, text. For 'refused' and
    'unavailable': reason (PageRefused.reason). bytes: what the fetch downloaded."""

    status: PageStatus
    reason: str | None = None
    final_url: str | None = None
    title: str | None = None
    text: str | None = None
    bytes: int = 0
    fetched_at: datetime = field(default_factory=_now)
    etag: str | None = None  # what the server said identifies this version, for a
    last_modified: str | None = None  # conditional request next time

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"page status {self.status!r} is not one of {STATUSES}")


def page_max_age(status: str, max_age_hours: float) -> float:
    """How long an entry with this status stays fresh under a TTL of max_age_hours."""
    if status == "unavailable":
        return min(UNAVAILABLE_TTL_HOURS, max_age_hours)
    return max_age_hours


class PageStore:
    """The web cache of one store (a DuckDB file, or a DuckLake: core.store.backend). Safe to
    share between threads of one process."""

    def __init__(self, path: Path | str, *, lock_timeout: float = 1.0,
                 hold_seconds: float = HOLD_SECONDS, retry_after: float = 30.0) -> None:
        self.backend = open_backend(path, lock_timeout=lock_timeout, hold_seconds=hold_seconds)
        self.path = self.backend.path  # None for a DuckLake
        self.lock_timeout = lock_timeout
        self.retry_after = retry_after
        self._state = threading.Lock()
        self._ready = False  # the schema is known to be in place
        self._paused_until = 0.0  # monotonic time before which the file is left alone
        self._warned = False
        self._attempt("open the page cache", None, None)

    # -- pages ----------------------------------------------------------------------------

    def get_page(self, key: str, max_age_hours: float | None) -> PageRecord | None:
        """The entry for key if it is fresh (see the module docstring), else None.
        max_age_hours None: a stored page of any age (what a conditional request checks)."""
        if max_age_hours is not None and max_age_hours <= 0:
            return None
        now = _now()
        hours = 1e6 if max_age_hours is None else max_age_hours
        cutoff = now - timedelta(hours=hours)
        short_cutoff = now - timedelta(hours=page_max_age("unavailable", hours))

        def read(con: duckdb.DuckDBPyConnection) -> PageRecord | None:
            row = con.execute(
                "SELECT status, reason, final_url, title, text, bytes, fetched_at, etag, "
                "last_modified FROM pages "
                "WHERE url = ? AND fetched_at >= CASE WHEN status = 'unavailable' THEN ? "
                "ELSE ? END", [key, short_cutoff, cutoff]).fetchone()
            if row is None:
                return None
            status, reason, final_url, title, text, size, fetched_at, etag, modified = row
            try:
                return PageRecord(status=status, reason=reason, final_url=final_url,
                                  title=title, text=text, bytes=int(size or 0),
                                  fetched_at=fetched_at, etag=etag, last_modified=modified)
            except ValueError:  # a row this code did not write: a miss, refetched over it
                log.debug("page cache: ignoring an unreadable entry for %s", key)
                return None

        return self._attempt("read a cached page", read, None)

    def put_page(self, key: str, record: PageRecord) -> None:
        """Store (or replace) the entry for key."""
        def write(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "INSERT INTO pages (url, final_url, status, reason, title, text, bytes, "
                "fetched_at, etag, last_modified) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (url) DO UPDATE "
                "SET final_url = excluded.final_url, status = excluded.status, "
                "reason = excluded.reason, title = excluded.title, text = excluded.text, "
                "bytes = excluded.bytes, fetched_at = excluded.fetched_at, "
                "etag = excluded.etag, last_modified = excluded.last_modified",
                [key, record.final_url, record.status, record.reason, record.title,
                 record.text, record.bytes, record.fetched_at, record.etag,
                 record.last_modified])

        self._attempt("cache a page", write, None)

    # -- searches -------------------------------------------------------------------------

    def get_search(self, key: str, max_age_hours: float) -> list[SearchResult] | None:
        """The results stored under key if fresh (an empty list is a fresh answer), else None."""
        if max_age_hours <= 0:
            return None
        cutoff = _now() - timedelta(hours=max_age_hours)

        def read(con: duckdb.DuckDBPyConnection) -> list[SearchResult] | None:
            row = con.execute("SELECT results FROM searches WHERE key = ? AND fetched_at >= ?",
                              [key, cutoff]).fetchone()
            if row is None:
                return None
            try:
                return [SearchResult(**item) for item in json.loads(row[0] or "[]")]
            except (ValueError, TypeError):  # not a list of SearchResult dicts: a miss
                log.debug("page cache: ignoring unreadable search results under %s", key)
                return None

        return self._attempt("read cached search results", read, None)

    def put_search(self, key: str, engine: str, query: str,
                   results: Sequence[SearchResult], *, fetched_at: datetime | None = None
                   ) -> None:
        """Store (or replace) the results of one search, empty or not."""
        payload = json.dumps([r.model_dump() for r in results])
        when = fetched_at or _now()

        def write(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(
                "INSERT INTO searches VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET "
                "engine = excluded.engine, query = excluded.query, "
                "results = excluded.results, fetched_at = excluded.fetched_at",
                [key, engine, query, payload, when])

        self._attempt("cache search results", write, None)

    # -- the connection, and what a broken file costs ----------------------------------------

    def _attempt(self, what: str, body: Callable[[duckdb.DuckDBPyConnection], _T] | None,
                 default: _T) -> _T:
        """Run body in one transaction on a fresh connection (creating or upgrading the schema
        first, the first time); on any store failure log, pause, and return default."""
        with self._state:
            if time.monotonic() < self._paused_until:
                return default
        try:
            if not self._ready:
                self.backend.ensure_schema()
                self._ready = True  # only once the schema is known to be in place
            return default if body is None else self.backend.write(body)
        except (StoreError, duckdb.Error, OSError) as exc:
            with self._state:
                self._paused_until = time.monotonic() + self.retry_after
                first, self._warned = not self._warned, True
            (log.warning if first else log.debug)(
                "page cache: could not %s in %s (%s); fetching without the cache for %.0fs",
                what, self.backend.name, exc, self.retry_after)
            return default
