"""Download one page's bytes under a FetchPolicy, checking every hop and enforcing every limit.

    downloader = Downloader(policy, stats)                      # one per Fetcher
    final_url, kind, charset, body = downloader.download(url)   # kind: "html", "text" or "pdf"

What a download does, hop by hop (the first request and every redirect):
  * the scheme must be http(s), and `guard.check_url` must accept the URL: a host that resolves
    to a private, loopback or link-local address is refused unless the allow-list names it. The
    client's transport repeats the check at connect time (DNS can change between the two).
    Either refusal is PageRefused("unsafe address: ..."), never PageUnavailable.
  * a host that timed out, ran past the deadline or looped earlier in this run fails fast,
    without a request; at most `max_per_host` requests are in flight per host (core.search.hosts)
  * robots.txt of the origin is consulted (fetched once per origin) unless respect_robots=False
  * GET with a descriptive User-Agent; redirects are followed by hand, at most max_redirects,
    and a URL seen twice is a redirect loop
Time: connect/read timeouts per request, and one deadline for the whole page (robots.txt, every
hop and the body): the timeouts of each request are clamped to what is left, the body is checked
against the clock between chunks, and a watchdog shuts the socket if a body stalls past it.
Body: anything but HTML, text or PDF (by Content-Type; octet-stream only when the bytes start
%PDF-) is refused before its body is read; the body is streamed and cut at max_bytes.

What it does not do: turn the bytes into text or a Source, count pages or refusals (both
core.search.web.Fetcher), caching (core.search.cache), JavaScript, retries.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Callable, NoReturn
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx

from core.search import pdf as pdflib
from core.search.fetch_types import (FetchPolicy, FetchStats, NotModified, PageRefused,
                                     PageUnavailable, Validators)
from core.search.guard import UnsafeURL, check_url, guarded_transport, refusal_of
from core.search.hosts import HostPolicy, RobotsCache, SlotTimeout, host_key

_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown"}
_PDF_TYPES = {"application/pdf", "application/x-pdf"}
_SNIFF_TYPES = {"application/octet-stream", "binary/octet-stream"}  # a PDF if it starts %PDF-
_REDIRECTS = {301, 302, 303, 307, 308}
_ACCEPT = ("text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,"
           "*/*;q=0.1")
RawPage = tuple[str, str, str | None, bytes]  # (final URL, kind, charset, body)


class Downloader:
    """The download half of a Fetcher: one thread-safe httpx client (guarded transport, no
    proxies), one HostPolicy and one robots.txt cache under one FetchPolicy. Requests (robots.txt
    included) and bytes on the wire are counted in `stats`."""

    def __init__(self, policy: FetchPolicy, stats: FetchStats, *,
                 resolve: Callable[..., Any] | None = None) -> None:
        self.policy = policy
        self._resolve = resolve
        self.stats = stats
        self.hosts = HostPolicy(policy.max_per_host)
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=40,
                              keepalive_expiry=15.0)
        self._client = httpx.Client(
            transport=guarded_transport(policy.allow, resolve=resolve, limits=limits),
            follow_redirects=False, trust_env=False,
            timeout=httpx.Timeout(connect=policy.connect_timeout, read=policy.read_timeout,
                                  write=policy.read_timeout, pool=policy.connect_timeout),
            headers={"User-Agent": policy.user_agent, "Accept": _ACCEPT,
                     "Accept-Encoding": "gzip, deflate"})
        self.robots = RobotsCache(
            self._client, user_agent=policy.user_agent, check=self._check_safe_quiet,
            on_response=self.stats.request,
            connect_timeout=min(policy.connect_timeout, 3.0),
            read_timeout=min(policy.read_timeout, 5.0), deadline=min(policy.deadline, 8.0))

    def close(self) -> None:
        self._client.close()

    # ---- one page, hop by hop ---------------------------------------------------------------

    def download(self, url: str) -> RawPage:
        return self.download_validated(url)[0]

    def download_validated(self, url: str, validators: Validators | None = None
                           ) -> tuple[RawPage, Validators]:
        """The page and what identifies its version (ETag, Last-Modified). With `validators`
        the request is conditional: a 304 raises NotModified (the stored text is current)."""
        policy = self.policy
        current = url
        seen: set[str] = set()
        until: float | None = None  # the deadline starts once the first slot is ours
        for hop in range(policy.max_redirects + 1):
            _check_scheme(current)
            self._check_safe(current)
            host = host_key(current)
            self._fail_fast(current, host)
            seen.add(urldefrag(current)[0])
            wait = None if until is None else until - time.monotonic()
            try:
                with self.hosts.slot(host, timeout=wait):
                    if until is None:
                        until = time.monotonic() + policy.deadline
                    self._fail_fast(current, host)  # it may have failed while we waited
                    if policy.respect_robots and not self.robots.allowed(current, until=until):
                        raise PageRefused(current, "disallowed by robots.txt")
                    location, page = self._get(current, host, until, first=hop == 0,
                                               validators=validators if hop == 0 else None)
            except SlotTimeout:
                raise PageUnavailable(current, "deadline exceeded (waiting for the host)") from None
            if page is not None:
                return page
            target = urljoin(current, location)
            if urldefrag(target)[0] in seen:
                self._fail(current, host, "redirect loop")
            if hop == policy.max_redirects:
                break
            current = target
        raise PageUnavailable(url, f"more than {policy.max_redirects} redirects", passing=False)

    def _get(self, url: str, host: str, until: float, *, first: bool,
             validators: Validators | None = None
             ) -> tuple[str | None, tuple[RawPage, Validators] | None]:
        """One GET: (location, None) for a redirect, (None, (page, its validators)) for a page;
        NotModified for a conditional request answered 304; raises otherwise."""
        policy = self.policy
        remaining = until - time.monotonic()
        if remaining <= 0:
            if first:  # the time went to this host's robots.txt: the host is to blame
                self._fail(url, host, "deadline exceeded")
            raise PageUnavailable(url, "deadline exceeded")  # earlier hops, other hosts
        timeout = httpx.Timeout(connect=min(policy.connect_timeout, remaining),
                                read=min(policy.read_timeout, remaining),
                                write=min(policy.read_timeout, remaining),
                                pool=min(policy.connect_timeout, remaining))
        self.stats.request(host)
        headers = {}
        if validators is not None and validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators is not None and validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified
        try:
            with self._client.stream("GET", url, timeout=timeout, headers=headers) as resp:
                try:
                    if resp.status_code == 304 and headers:
                        raise NotModified(url)
                    if resp.status_code in _REDIRECTS and resp.headers.get("location"):
                        return resp.headers["location"], None
                    _check_status(url, resp)
                    media, charset = _content_type(resp)
                    kind = _kind(url, media)
                    declared = resp.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > policy.max_bytes:
                        raise PageRefused(url, f"too large ({declared} bytes > "
                                               f"{policy.max_bytes})")
                    body = self._read_body(url, host, resp, until)
                finally:
                    self.stats.downloaded(resp.num_bytes_downloaded)
                if kind == "sniff":
                    if not pdflib.looks_like_pdf(body):
                        raise PageRefused(url, f"not a web page ({media})")
                    kind = "pdf"
                elif kind == "html" and not media and pdflib.looks_like_pdf(body):
                    kind = "pdf"
                found = Validators(_header(resp, "etag"), _header(resp, "last-modified"))
                return None, ((url, kind, charset, body), found)
        except PageUnavailable as exc:
            if exc.retry_after:  # the next request to this host waits as long as it asked
                self.hosts.pause(host, min(exc.retry_after, policy.deadline))
            raise
        except (PageRefused, NotModified):
            raise
        except UnsafeURL as exc:
            raise PageRefused(url, f"unsafe address: {exc.reason}") from exc
        except httpx.HTTPError as exc:
            refused = refusal_of(exc)
            if refused:
                raise PageRefused(url, f"unsafe address: {refused}") from exc
            late = time.monotonic() >= until - 0.01
            if isinstance(exc, httpx.PoolTimeout):  # our own connection pool, not the host
                raise PageUnavailable(url, "timed out waiting for a connection") from exc
            if isinstance(exc, httpx.TimeoutException):
                self._fail(url, host, "deadline exceeded" if late else "timed out", exc)
            if isinstance(exc, httpx.UnsupportedProtocol):
                raise PageRefused(url, "unsupported URL scheme") from exc
            if late:  # the watchdog shut a stalled socket
                self._fail(url, host, "deadline exceeded", exc)
            raise PageUnavailable(url, f"network error ({type(exc).__name__})") from exc
        except (httpx.InvalidURL, ValueError) as exc:  # httpx.InvalidURL is no HTTPError
            raise PageRefused(url, "invalid URL") from exc
        except OSError as exc:  # a guard refusal or a socket error httpx did not wrap
            refused = refusal_of(exc)
            if refused:
                raise PageRefused(url, f"unsafe address: {refused}") from exc
            raise PageUnavailable(url, f"network error ({type(exc).__name__})") from exc

    def _read_body(self, url: str, host: str, resp: httpx.Response, until: float) -> bytes:
        """The body, or PageRefused as soon as it passes max_bytes (never download it all), or
        PageUnavailable when the deadline passes first (checked between chunks; the watchdog
        covers a body that stops sending altogether)."""
        max_bytes = self.policy.max_bytes
        chunks: list[bytes] = []
        size = 0
        with _Watchdog(resp, until):
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise PageRefused(url, f"too large (over {max_bytes} bytes)")
                chunks.append(chunk)
                if time.monotonic() > until:
                    self._fail(url, host, "deadline exceeded")
        if time.monotonic() > until:  # the watchdog ended a close-delimited body early
            self._fail(url, host, "deadline exceeded")
        return b"".join(chunks)

    # ---- checks -----------------------------------------------------------------------------

    def _check_safe(self, url: str) -> None:
        try:
            check_url(url, self.policy.allow, resolve=self._resolve)
        except UnsafeURL as exc:
            raise PageRefused(url, f"unsafe address: {exc.reason}") from exc

    def _check_safe_quiet(self, url: str) -> None:
        check_url(url, self.policy.allow, resolve=self._resolve)

    def _fail_fast(self, url: str, host: str) -> None:
        reason = self.hosts.failure(host, url)
        if reason is not None:
            raise PageUnavailable(url, f"host failed earlier in this run: {reason}",
                                  passing=False)

    def _fail(self, url: str, host: str, reason: str,
              cause: BaseException | None = None) -> NoReturn:
        """Remember the host as failed and raise PageUnavailable(reason)."""
        self.hosts.mark_failed(host, reason, url)
        raise PageUnavailable(url, reason, passing=reason != "redirect loop") from cause


class _Watchdog:
    """Shuts the response's socket at the deadline, so a body that stops sending cannot hold
    the thread past it (a read timeout alone restarts with every byte). Best effort: without
    a socket to reach (another transport), the chunk-by-chunk clock check still applies."""

    def __init__(self, resp: httpx.Response, until: float) -> None:
        self._timer: threading.Timer | None = None
        try:
            stream = resp.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
        except Exception:  # noqa: BLE001 - no socket, no watchdog
            sock = None
        if isinstance(sock, socket.socket):
            delay = max(until - time.monotonic(), 0.0) + 0.05
            self._timer = threading.Timer(delay, _shut, (sock,))
            self._timer.daemon = True

    def __enter__(self) -> "_Watchdog":
        if self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:  # socket.socket's own shutdown, not SSLSocket's, which is not safe across threads
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass




# ---- helpers ------------------------------------------------------------------------------

def _header(resp: httpx.Response, name: str) -> str | None:
    """A validator header as sent back on the next request: printable, bounded, else None."""
    value = resp.headers.get(name, "").strip()
    return value if value and len(value) <= 200 and value.isprintable() else None


def _check_scheme(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise PageRefused(url, f"unsupported URL scheme ({parts.scheme or 'none'})")


def _check_status(url: str, resp: httpx.Response) -> None:
    status = resp.status_code
    if status == 429 or status >= 500:
        raise PageUnavailable(url, f"HTTP {status}", retry_after=_retry_after(resp))
    if status >= 300:
        raise PageRefused(url, f"HTTP {status}")


def _retry_after(resp: httpx.Response) -> float | None:
    """Retry-After in seconds (the delta form; an HTTP date counts as not said)."""
    value = resp.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _content_type(resp: httpx.Response) -> tuple[str, str | None]:
    raw = resp.headers.get("content-type", "")
    media, _, params = raw.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip("\"' ")
    return media.strip().lower(), charset


def _kind(url: str, media: str) -> str:
    """"html", "text", "pdf" or "sniff" (decide from the bytes); PageRefused for anything else.
    A missing content type is read as HTML (unless the bytes turn out to be a PDF)."""
    if not media or media in _HTML_TYPES:
        return "html"
    if media in _TEXT_TYPES:
        return "text"
    if media in _PDF_TYPES:
        return "pdf"
    if media in _SNIFF_TYPES:
        return "sniff"
    raise PageRefused(url, f"not a web page ({media})")
