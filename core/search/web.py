"""Fetch one web page and extract its main text, refusing anything that is not a readable page.

    PageRefused(url, reason)          this page will not become a Source: wrong scheme, not
    │                                 HTML/text, too big, 4xx, binary, nothing to extract
    └── PageUnavailable               the fetch itself failed: network error, timeout, 5xx,
                                      429, too many redirects; might work later

Both are exceptions a research step can absorb: a page that cannot be read is a page we skip
(`SearchBackend.read` returns None). PageUnavailable is a subclass so that callers that only care
"did I get text?" catch one type, while callers that want to retry can tell the difference.

What it does: GET with a real User-Agent, follow at most `max_redirects` redirects (checking the
scheme of every hop), stream the body and stop at max_bytes, decode (valid UTF-8 first, then the
declared charset, then detection), extract with trafilatura, and trim the text at a paragraph or
sentence boundary to max_chars. What it does not do: robots.txt, JavaScript, PDFs, caching.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

import httpx

from core.models import Source
from core.search import text as textlib

USER_AGENT = ("Mozilla/5.0 (compatible; researchflow/0.1; +https://github.com/researchflow) "
              "python-httpx")
_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown"}
_REDIRECTS = {301, 302, 303, 307, 308}


class PageRefused(Exception):
    """This URL does not yield a Source. `reason` is short and safe to log."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{reason}: {url}")
        self.url = url
        self.reason = reason


class PageUnavailable(PageRefused):
    """The fetch failed in a way that may pass (network, timeout, 5xx, 429)."""


def fetch_page(url: str, *, timeout: float = 20.0, max_bytes: int = 3_000_000,
               max_chars: int = 60_000, max_redirects: int = 5,
               client: httpx.Client | None = None) -> Source:
    """GET `url` and return its extracted text as a Source (see module docstring)."""
    own = client is None
    if own:
        client = httpx.Client(timeout=timeout, follow_redirects=False,
                              headers={"User-Agent": USER_AGENT,
                                       "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,"
                                                 "*/*;q=0.1"})
    try:
        final_url, content_type, charset, body = _download(client, url, timeout, max_bytes,
                                                           max_redirects)
    finally:
        if own:
            client.close()
    return _to_source(final_url, content_type, charset, body, max_chars)


def _download(client: httpx.Client, url: str, timeout: float, max_bytes: int,
              max_redirects: int) -> tuple[str, str, str | None, bytes]:
    current = url
    for _ in range(max_redirects + 1):
        _check_scheme(current)
        try:
            with client.stream("GET", current, timeout=timeout, follow_redirects=False) as resp:
                if resp.status_code in _REDIRECTS and resp.headers.get("location"):
                    current = urljoin(current, resp.headers["location"])
                    continue
                _check_status(current, resp)
                content_type, charset = _content_type(resp)
                if content_type and content_type not in _HTML_TYPES | _TEXT_TYPES:
                    raise PageRefused(current, f"not a web page ({content_type})")
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise PageRefused(current, f"too large ({declared} bytes > {max_bytes})")
                return current, content_type, charset, _read_capped(current, resp, max_bytes)
        except httpx.TimeoutException as exc:
            raise PageUnavailable(current, "timed out") from exc
        except httpx.UnsupportedProtocol as exc:
            raise PageRefused(current, "unsupported URL scheme") from exc
        except (httpx.InvalidURL, ValueError) as exc:
            raise PageRefused(current, "invalid URL") from exc
        except httpx.HTTPError as exc:
            raise PageUnavailable(current, f"network error ({type(exc).__name__})") from exc
    raise PageUnavailable(url, f"more than {max_redirects} redirects")


def _check_scheme(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise PageRefused(url, f"unsupported URL scheme ({parts.scheme or 'none'})")


def _check_status(url: str, resp: httpx.Response) -> None:
    status = resp.status_code
    if status == 429 or status >= 500:
        raise PageUnavailable(url, f"HTTP {status}")
    if status >= 300:
        raise PageRefused(url, f"HTTP {status}")


def _content_type(resp: httpx.Response) -> tuple[str, str | None]:
    raw = resp.headers.get("content-type", "")
    media, _, params = raw.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip("\"' ")
    return media.strip().lower(), charset


def _read_capped(url: str, resp: httpx.Response, max_bytes: int) -> bytes:
    """The body, or PageRefused as soon as it passes max_bytes (never download it all)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise PageRefused(url, f"too large (over {max_bytes} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def _to_source(url: str, content_type: str, charset: str | None, body: bytes,
               max_chars: int) -> Source:
    if not body.strip():
        raise PageRefused(url, "empty body")
    if textlib.looks_binary(body):
        raise PageRefused(url, "binary content")
    decoded = textlib.decode_body(body, charset)
    if content_type in _TEXT_TYPES:
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
