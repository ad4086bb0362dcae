"""The vocabulary the page fetcher's layers share: its settings, its errors and its counters.

    PageRefused(url, reason)      this page will not become a Source (see core.search.web)
    └── PageUnavailable           the fetch itself failed; might work later
    PageFault (a Transient)       what a search backend's read raises for PageUnavailable
    FetchPolicy                   limits and switches for one run (FetchPolicy.from_settings)
    FetchStats                    thread-safe counters: requests, bytes, pages, refusals
    USER_AGENT                    the default User-Agent

Defined here so that core.search.download (which raises and obeys them) and core.search.web
(which re-exports them, their public home) can both import them without a cycle.

What it does not do: fetch anything.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from core.signals.errors import PicklableError
from core.signals import Transient
from core.search.addresses import AllowList

USER_AGENT = "researchflow/0.1 (+https://github.com/researchflow/researchflow; research bot)"


class PageRefused(PicklableError):
    """This URL does not yield a Source. `reason` is short and safe to log."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{reason}: {url}")
        self.url = url
        self.reason = reason


class PageUnavailable(PageRefused):
    """The fetch failed (network, timeout, 5xx, 429, a redirect loop). `passing`: trying again
    later may work (not for a loop, nor for a host this run already gave up on).
    `retry_after`: the seconds the host asked for (Retry-After), when it said."""

    def __init__(self, url: str, reason: str, retry_after: float | None = None, *,
                 passing: bool = True) -> None:
        super().__init__(url, reason)
        self.retry_after = retry_after
        self.passing = passing


class PageFault(Transient):
    """A page could not be read for a reason that may pass: the read is retried with backoff
    in this run (tasks.retry) and never remembered as unreadable. `reason` is short and safe."""

    def __init__(self, url: str, reason: str, retry_after: float | None = None) -> None:
        super().__init__(f"page unavailable: {reason}: {url}", provider="web")
        self.url = url
        self.reason = reason
        self.retry_after = retry_after


def _no_allow_list() -> AllowList:
    return AllowList.parse(None)


@dataclass(frozen=True)
class FetchPolicy:
    """Everything a Fetcher needs to know. `deadline` is the overall seconds for one page,
    robots.txt, redirects and body included."""

    allow: AllowList = field(default_factory=_no_allow_list)
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    deadline: float = 20.0
    max_redirects: int = 5
    max_bytes: int = 3_000_000
    max_chars: int = 60_000
    max_per_host: int = 2
    respect_robots: bool = True
    user_agent: str = USER_AGENT

    @classmethod
    def from_settings(cls, settings: Any) -> "FetchPolicy":
        return cls(allow=AllowList.parse(settings.fetch_allow_hosts),
                   connect_timeout=settings.fetch_connect_timeout,
                   read_timeout=settings.fetch_read_timeout,
                   deadline=settings.page_deadline,
                   max_redirects=settings.max_redirects,
                   max_bytes=settings.max_page_bytes,
                   max_chars=settings.max_source_chars,
                   max_per_host=settings.max_fetches_per_host,
                   respect_robots=settings.respect_robots)


class FetchStats:
    """Counters for benches and logs (thread-safe): requests per host (robots.txt included),
    bytes downloaded (on the wire), pages read, and refusals by reason (the reason up to its
    first detail, e.g. "too large", "HTTP 404", "unsafe address")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.bytes_downloaded = 0
        self.pages = 0
        self.refusals: Counter[str] = Counter()

    def request(self, host: str, nbytes: int = 0) -> None:
        with self._lock:
            self.requests[host] += 1
            self.bytes_downloaded += nbytes

    def downloaded(self, nbytes: int) -> None:
        with self._lock:
            self.bytes_downloaded += nbytes

    def page(self) -> None:
        with self._lock:
            self.pages += 1

    def refused(self, exc: PageRefused) -> None:
        with self._lock:
            self.refusals[reason_key(exc.reason)] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": dict(self.requests), "bytes_downloaded": self.bytes_downloaded,
                    "pages": self.pages, "refusals": dict(self.refusals)}


def reason_key(reason: str) -> str:
    """A refusal reason without its details: "too large (123 bytes > 50)" -> "too large"."""
    for sep in (" (", ": "):
        reason = reason.split(sep, 1)[0]
    return reason.strip()


@dataclass(frozen=True)
class Validators:
    """What a server said identifies its version of a page (ETag, Last-Modified): sent back
    as If-None-Match / If-Modified-Since, a 304 answers that the stored text is still it."""

    etag: str | None = None
    last_modified: str | None = None

    def __bool__(self) -> bool:
        return bool(self.etag or self.last_modified)


class NotModified(Exception):
    """A conditional request answered 304: the page is the version already stored."""

    def __init__(self, url: str) -> None:
        super().__init__(f"{url}: not modified")
        self.url = url
