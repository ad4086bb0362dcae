"""Per-host manners for the page fetcher: how many requests at once, which hosts to give up on,
and what robots.txt says.

    HostPolicy(max_per_host)
        with hosts.slot(host): ...        at most max_per_host requests in flight per host
        hosts.mark_failed(host, reason,   remember a host that timed out, ran past the page
                          url)            deadline or looped; later URLs on it fail fast
        hosts.failure(host, url)          (for an hour: a worker process outlives its runs),
                                          but the URL that failed gets one retry of its own
        hosts.pause(host, seconds)        a host that said Retry-After: its next request
                                          waits that long (within the page's deadline)
    RobotsCache(client, user_agent=...)
        robots.allowed(url) -> bool       robots.txt fetched once per origin, then cached

Hosts are keyed by `host_key(url)`: the lower-cased host name plus ":port" when the URL names a
non-default port. Everything here is thread-safe: one Fetcher serves every research thread.

robots.txt follows RFC 9309 where it matters to a polite reader: a missing file or any 4xx allows
everything; a 5xx, a timeout or a network error also allows everything here (a research run
should not stall on a broken robots.txt) but the answer is remembered, so the file is asked for
once per origin; only the first 500 KB are parsed. Redirects are followed (a few hops, each
passed to `check` first, so robots.txt never becomes a way around the SSRF guard). Parsing is
urllib.robotparser's: first matching group, plain prefix rules, no wildcards.
"""

from __future__ import annotations

import threading
import time
import urllib.robotparser
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = {301, 302, 303, 307, 308}


def host_key(url: str) -> str:
    """`host` or `host:port` of `url` (lower case, default ports dropped); "" when it has none."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        return host
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def origin_of(url: str) -> str:
    """scheme://host[:port] of `url`, the unit robots.txt applies to."""
    return f"{urlsplit(url).scheme.lower()}://{host_key(url)}"


FORGET_AFTER = 3_600.0  # seconds a failed host stays skipped


class SlotTimeout(Exception):
    """No slot for the host freed up within the time allowed."""


class HostPolicy:
    """Per-host concurrency limit and failure memory (see module docstring)."""

    def __init__(self, max_per_host: int = 2, *, forget_after: float = FORGET_AFTER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_per_host < 1:
            raise ValueError("max_per_host must be at least 1")
        self.max_per_host = max_per_host
        # A worker process outlives runs: a host that hung once is given another chance later.
        self.forget_after = forget_after
        self._clock = clock
        self._lock = threading.Lock()
        self._slots: dict[str, threading.BoundedSemaphore] = {}
        self._failed: dict[str, tuple[str, float]] = {}
        self._failures: dict[tuple[str, str], int] = {}  # (host, url) -> times it failed
        self._paused: dict[str, float] = {}  # host -> clock time its next request may start

    @contextmanager
    def slot(self, host: str, timeout: float | None = None) -> Iterator[None]:
        """Hold one of the host's slots for the duration of the block; SlotTimeout when none is
        free within `timeout` seconds (None: wait as long as it takes)."""
        with self._lock:
            sem = self._slots.get(host)
            if sem is None:
                sem = self._slots[host] = threading.BoundedSemaphore(self.max_per_host)
        if not sem.acquire(timeout=None if timeout is None else max(timeout, 0.0)):
            raise SlotTimeout(host)
        try:
            with self._lock:
                wait = self._paused.get(host, 0.0) - self._clock()
            if wait > 0:
                if timeout is not None and wait > timeout:
                    raise SlotTimeout(host)
                time.sleep(wait)
            yield
        finally:
            sem.release()

    def pause(self, host: str, seconds: float) -> None:
        """The host asked for `seconds` of quiet (Retry-After): its next request waits."""
        with self._lock:
            self._paused[host] = max(self._paused.get(host, 0.0), self._clock() + seconds)

    def mark_failed(self, host: str, reason: str, url: str | None = None) -> None:
        """Remember that `host` failed in a way another URL on it would repeat (the first
        reason is kept), and how often `url` failed."""
        with self._lock:
            self._expire()
            self._failed.setdefault(host, (reason, self._clock()))
            if url is not None:
                self._failures[(host, url)] = self._failures.get((host, url), 0) + 1

    def failure(self, host: str, url: str | None = None) -> str | None:
        """Why requests to `host` fail fast, or None. The URL that failed once may be tried
        once more (its own retry), so a passing timeout does not cost that page for good."""
        with self._lock:
            self._expire()
            found = self._failed.get(host)
            if found is None or (url is not None and self._failures.get((host, url)) == 1):
                return None
            return found[0]

    def failed_hosts(self) -> dict[str, str]:
        with self._lock:
            self._expire()
            return {host: reason for host, (reason, _) in self._failed.items()}

    def _expire(self) -> None:
        now = self._clock()
        for host in [h for h, (_, at) in self._failed.items() if now - at > self.forget_after]:
            del self._failed[host]
            for key in [k for k in self._failures if k[0] == host]:
                del self._failures[key]


@dataclass(frozen=True)
class RobotsRules:
    """What one origin's robots.txt said. `parser` None: everything is allowed; `note` says why
    ("missing", "HTTP 503", "timed out", ...), "" for a file that was read."""

    parser: urllib.robotparser.RobotFileParser | None
    note: str = ""

    def allows(self, url: str, user_agent: str) -> bool:
        return self.parser is None or self.parser.can_fetch(user_agent, url)


class RobotsCache:
    """robots.txt per origin, fetched once through `client` (see module docstring).

    `check(url)` is called before every robots.txt request (the fetcher passes the SSRF guard's
    check); if it raises, robots.txt is treated as absent and nothing is requested.
    `on_response(host, nbytes)` is told about every request made (nbytes 0 when it failed), for
    the fetcher's stats."""

    def __init__(self, client: httpx.Client, *, user_agent: str,
                 check: Callable[[str], None] | None = None,
                 on_response: Callable[[str, int], None] | None = None,
                 connect_timeout: float = 3.0, read_timeout: float = 5.0,
                 deadline: float = 8.0, max_bytes: int = 500_000,
                 max_redirects: int = 3) -> None:
        self._client = client
        self._user_agent = user_agent
        self._check = check
        self._on_response = on_response
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._deadline = deadline
        self._max_bytes = max_bytes
        self._max_redirects = max_redirects
        self._lock = threading.Lock()
        self._origin_locks: dict[str, threading.Lock] = {}
        self._rules: dict[str, RobotsRules] = {}

    def allowed(self, url: str, user_agent: str | None = None, *,
                until: float | None = None) -> bool:
        """Whether robots.txt lets `user_agent` fetch `url`. `until` (a time.monotonic() value)
        bounds the robots.txt request, so it never outlives the page it is asked for."""
        return self.rules(url, until=until).allows(url, user_agent or self._user_agent)

    def rules(self, url: str, *, until: float | None = None) -> RobotsRules:
        origin = origin_of(url)
        with self._lock:
            known = self._rules.get(origin)
            if known is not None:
                return known
            origin_lock = self._origin_locks.setdefault(origin, threading.Lock())
        with origin_lock:  # one request per origin, however many threads ask at once
            with self._lock:
                known = self._rules.get(origin)
            if known is None:
                known = self._load(origin, until)
                with self._lock:
                    self._rules[origin] = known
            return known

    def cached(self) -> dict[str, RobotsRules]:
        with self._lock:
            return dict(self._rules)

    # ---- fetching ---------------------------------------------------------------------------

    def _load(self, origin: str, until: float | None) -> RobotsRules:
        stop = time.monotonic() + self._deadline
        if until is not None:
            stop = min(stop, until)
        url = origin + "/robots.txt"
        for _ in range(self._max_redirects + 1):
            if self._check is not None:
                try:
                    self._check(url)
                except Exception:  # noqa: BLE001 - an unsafe robots.txt is no robots.txt
                    return RobotsRules(None, "unsafe address")
            remaining = stop - time.monotonic()
            if remaining <= 0:
                return RobotsRules(None, "timed out")
            timeout = httpx.Timeout(connect=min(self._connect_timeout, remaining),
                                    read=min(self._read_timeout, remaining),
                                    write=min(self._read_timeout, remaining),
                                    pool=min(self._connect_timeout, remaining))
            try:
                with self._client.stream("GET", url, timeout=timeout, follow_redirects=False,
                                         headers={"User-Agent": self._user_agent,
                                                  "Accept": "text/plain,*/*;q=0.5"}) as resp:
                    status = resp.status_code
                    if status in _REDIRECTS and resp.headers.get("location"):
                        self._count(url, 0)
                        url = urljoin(url, resp.headers["location"])
                        if urlsplit(url).scheme.lower() not in ("http", "https"):
                            return RobotsRules(None, "redirected away")
                        continue
                    if 400 <= status < 500:
                        self._count(url, 0)
                        return RobotsRules(None, "missing" if status in (404, 410)
                                           else f"HTTP {status}")
                    if status >= 300:
                        self._count(url, 0)
                        return RobotsRules(None, f"HTTP {status}")
                    body, state = self._read(resp, stop)
                    self._count(url, len(body))
                    if state == "late":
                        return RobotsRules(None, "timed out")
            except httpx.TimeoutException:
                self._count(url, 0)
                return RobotsRules(None, "timed out")
            except Exception as exc:  # noqa: BLE001 - network errors and guard refusals alike
                self._count(url, 0)
                return RobotsRules(None, f"unreachable ({type(exc).__name__})")
            cut = state == "cut"
            return RobotsRules(_parse(body, cut=cut), "cut" if cut else "")
        return RobotsRules(None, "too many redirects")

    def _read(self, resp: httpx.Response, stop: float) -> tuple[bytes, str]:
        """Up to max_bytes of the body and how reading ended: "whole", "cut" (a longer file is
        cut at max_bytes, as RFC 9309 allows) or "late" (the deadline passed first)."""
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > self._max_bytes:
                return b"".join(chunks)[:self._max_bytes], "cut"
            if time.monotonic() > stop:
                return b"".join(chunks), "late"
        return b"".join(chunks), "whole"

    def _count(self, url: str, nbytes: int) -> None:
        if self._on_response is not None:
            self._on_response(host_key(url), nbytes)


def _parse(body: bytes, *, cut: bool = False) -> urllib.robotparser.RobotFileParser:
    text = body.decode("utf-8", "replace").lstrip("\ufeff")
    if cut:  # a cut file may end mid-line: drop the partial last line rather than misread it
        text = text.rpartition("\n")[0]
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(text.splitlines())
    return parser
