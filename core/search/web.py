"""Fetch web pages and extract their main text, refusing anything that is not a readable page.

    PageRefused(url, reason)          this page will not become a Source: wrong scheme, unsafe
    │                                 address, disallowed by robots.txt, not HTML/text/PDF, too
    │                                 big, 4xx, binary, nothing to extract
    └── PageUnavailable               the fetch itself failed: network error, timeout, deadline,
                                      5xx, 429, too many redirects, a redirect loop, a host that
                                      already failed in this run; might work later

Both are exceptions a research step can absorb: a page that cannot be read is a page we skip
(`SearchBackend.read` returns None). PageUnavailable is a subclass so that callers that only care
"did I get text?" catch one type, while callers that want to retry can tell the difference.

    fetcher = Fetcher(FetchPolicy.from_settings(settings))   # one per run, shared by threads
    source = fetcher(url)                                     # Source, or PageRefused
    fetcher.refuses(url)                                      # refused without a request? why
    fetcher.stats.snapshot(); fetcher.close()
    fetch_page(url, allow="127.0.0.1:8080", ...)              # one page, a throwaway Fetcher

This module is the public face of page fetching; the work is split below it:
  * core.search.download: the bytes — redirects hop by hop, SSRF checks (core.search.guard),
    per-host slots and failures, robots.txt, timeouts and the page deadline, the size cap
  * here: the bytes become a Source — HTML goes through trafilatura, plain text is kept as is,
    PDFs through core.search.pdf; the text is trimmed at a paragraph or sentence boundary to
    max_chars; pages and refusals are counted in `Fetcher.stats`
  * core.search.fetch_types: PageRefused, PageUnavailable, FetchPolicy, FetchStats, USER_AGENT,
    all re-exported here (import them from here)

What it does not do: JavaScript, caching (core.search.cache wraps a Fetcher), retries.
"""

from __future__ import annotations

import logging
from dataclasses import fields, replace
from typing import Any, Callable

from core.models import Source
from core.search import pdf as pdflib
from core.search import page_text as textlib
from core.search.addresses import AllowList
from core.search.download import Downloader
from core.search.guard import refused_unasked
from core.search.fetch_types import (USER_AGENT, FetchPolicy, FetchStats, NotModified, PageFault,
                                     PageRefused, PageUnavailable, Validators, reason_key)

__all__ = ["USER_AGENT", "FetchPolicy", "FetchStats", "Fetcher", "NotModified", "PageRefused",
           "PageUnavailable", "Validators", "fetch_page", "read_listed", "reason_key"]

log = logging.getLogger(__name__)


class Fetcher:
    """Reads pages under one FetchPolicy; one instance serves every thread of a run (one
    thread-safe httpx client, one HostPolicy, one robots.txt cache). Call it with a URL."""

    def __init__(self, policy: FetchPolicy | None = None, *,
                 resolve: Callable[..., Any] | None = None) -> None:
        self.policy = policy = policy or FetchPolicy()
        self.stats = FetchStats()
        self._downloader = Downloader(policy, self.stats, resolve=resolve)
        self.hosts = self._downloader.hosts
        self.robots = self._downloader.robots

    def __call__(self, url: str) -> Source:
        return self.fetch_validated(url)[0]

    def fetch_validated(self, url: str, validators: Validators | None = None
                        ) -> tuple[Source, Validators]:
        """The page and what identifies its version; with `validators` the request is
        conditional and a 304 raises NotModified (core.search.cache keeps the stored text)."""
        try:
            (final_url, kind, charset, body), found = self._downloader.download_validated(
                url, validators)
            source = _to_source(final_url, kind, charset, body, self.policy.max_chars)
        except PageRefused as exc:
            self.stats.refused(exc)
            raise
        self.stats.page()
        return source, found

    def refuses(self, url: str) -> str | None:
        """Why `url` would be refused before any request (see guard.refused_unasked)."""
        return refused_unasked(url, self.policy.allow)

    def close(self) -> None:
        self._downloader.close()

    def __enter__(self) -> "Fetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fetch_page(url: str, *, timeout: float | None = None, allow: AllowList | str | None = None,
               resolve: Callable[..., Any] | None = None, **policy: Any) -> Source:
    """Fetch one page with a throwaway Fetcher (prefer one shared Fetcher per run).

    Keyword arguments are FetchPolicy fields; `allow` may also be the allow-list's text
    ("127.0.0.1:8080,wiki.internal"). `timeout` (older callers) caps the whole page: it sets
    the deadline and clamps the connect and read timeouts."""
    known = {f.name for f in fields(FetchPolicy)}
    unknown = set(policy) - known
    if unknown:
        raise TypeError(f"fetch_page() got unexpected keyword arguments {sorted(unknown)}")
    if allow is not None:
        policy["allow"] = AllowList.parse(allow) if isinstance(allow, str) else allow
    base = FetchPolicy(**policy)
    if timeout is not None:
        base = replace(base, deadline=policy.get("deadline", timeout),
                       connect_timeout=min(base.connect_timeout, timeout),
                       read_timeout=min(base.read_timeout, timeout))
    with Fetcher(base, resolve=resolve) as fetcher:
        return fetcher(url)


def read_listed(fetch: Callable[[str], Source], url: str) -> Source | None:
    """What a web search backend's `read` does with the page of a result it listed: the page
    as a Source; None when it is refused (remembered for the page TTL) or given up on for this
    run; `PageFault` when its fetch failed in a way that may pass (a 5xx, a 429, a timeout:
    retried by the caller, never remembered as unreadable)."""
    try:
        return fetch(url)
    except PageUnavailable as exc:
        if exc.passing:
            raise PageFault(url, exc.reason, exc.retry_after) from exc
        log.info("skipping page %s", exc)
        return None
    except PageRefused as exc:
        log.info("skipping page %s", exc)
        return None


def _to_source(url: str, kind: str, charset: str | None, body: bytes,
               max_chars: int) -> Source:
    if not body.strip():
        raise PageRefused(url, "empty body")
    if kind == "pdf":
        text, title = pdflib.pdf_to_text(body, url=url, max_chars=max_chars)
        return Source(url=url, title=title or url, text=text)
    if textlib.looks_binary(body):
        raise PageRefused(url, "binary content")
    decoded = textlib.decode_body(body, charset)
    if kind == "text":
        text = decoded.strip()
        title = textlib.first_line_title(text)
    else:
        page = textlib.extract_html(decoded, url=url)
        if page is None:
            raise PageRefused(url, "no readable text")
        text, title = page.text, page.title
    if not text:
        raise PageRefused(url, "no readable text")
    return Source(url=url, title=title or url, text=textlib.trim_text(text, max_chars))
