"""Web search through a self-hosted SearXNG instance, read through our own page fetcher.

`SearxngSearch(base_url).search(query, k)` asks the instance's search API,
`GET {base_url}/search?q=...&format=json&pageno=1` (plus `engines`, `categories` and `language`
when set), and maps its `results[]` (`url`, `title`, `content`) to SearchResult in the order
given, one result per URL, http(s) URLs only. The instance is the operator's own service: it is
reached directly, not through the SSRF guard; the pages it lists are read by the guarded
fetcher like any other web page (`read`).

Errors become typed signals, once, here:

    403 (the instance has the json format switched off)   -> Fatal, with the settings.yml fix
    429 (the instance's limiter)                          -> RateLimited (retry-after honoured)
    5xx, connection errors, timeouts                      -> Transient
    other 4xx, a 200 that is not SearXNG's JSON           -> Fatal (the URL is wrong)
    no results while every engine asked failed            -> Transient, naming the engines
    no results                                            -> [] (an empty search is not an error)

The base URL may not carry credentials: it is part of the run's configuration, which reaches
Prefect parameters and the store (see `check_url`).

What it does not do: paging past the first page (SearXNG sends about 20 results a page),
answers, infoboxes or suggestions.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx

from core.models import SearchResult
from core.search.web_search import Fetcher, WebSearch, listed
from core.signals import Fatal, RateLimited, Signal, Transient

URL_HINT = ("set RESEARCHFLOW_SEARXNG_URL to the instance's root, e.g. http://127.0.0.1:8888 "
            "(the address its web page is served at)")
JSON_HINT = ("the SearXNG instance refuses format=json: add json to search.formats in its "
             "settings.yml (formats: [html, json]) and restart it")


def check_url(url: str | None) -> str:
    """The base URL without a trailing slash; Fatal when it is missing, not http(s), or carries
    a user or password."""
    if not url or not url.strip():
        raise Fatal("search=searxng but no SearXNG URL is set", provider="searxng",
                    reason="config", hint=URL_HINT)
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Fatal(f"SearXNG URL {url!r} is not an http(s) URL", provider="searxng",
                    reason="config", hint=URL_HINT)
    if parts.username or parts.password:
        raise Fatal("the SearXNG URL carries credentials", provider="searxng", reason="config",
                    hint="remove user:password from RESEARCHFLOW_SEARXNG_URL: the URL is part "
                         "of the run's settings, which are stored (reach the instance through "
                         "a loopback or intranet address instead)")
    if parts.query or parts.fragment:
        raise Fatal(f"SearXNG URL {url!r} has a query or fragment", provider="searxng",
                    reason="config", hint=URL_HINT)
    return url


class SearxngSearch(WebSearch):
    name = "searxng"

    def __init__(self, base_url: str, *, fetcher: Fetcher | None = None, timeout: float = 30.0,
                 engines: str | None = None, categories: str | None = None,
                 language: str | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(fetcher)
        self._base_url = check_url(base_url)
        self._options = {k: v for k, v in (("engines", _csv(engines)),
                                            ("categories", _csv(categories)),
                                            ("language", (language or "").strip() or None))
                         if v}
        self._client = httpx.Client(timeout=timeout, transport=transport,
                                    headers={"Accept": "application/json"},
                                    follow_redirects=False)

    def __repr__(self) -> str:
        return f"SearxngSearch(base_url={self._base_url!r})"

    @property
    def params(self) -> dict[str, str]:
        """The instance and the options sent besides the query: for a cache key."""
        return {"url": self._base_url, **self._options}

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        query = " ".join(query.split())
        if not query:
            return []
        data = self._call({"q": query, "format": "json", "pageno": "1", **self._options})
        results = listed(data.get("results") or [], _result, k)
        if not results:
            failed = _unresponsive(data.get("unresponsive_engines"))
            if failed:
                raise Transient("SearXNG found nothing and its engines failed: "
                                + "; ".join(failed), provider="searxng")
        return results

    def close(self) -> None:
        self._client.close()

    # ---- the call and its errors --------------------------------------------------------------

    def _call(self, params: dict[str, str]) -> dict[str, Any]:
        try:
            response = self._client.get(f"{self._base_url}/search", params=params)
        except httpx.TimeoutException as exc:
            raise Transient("SearXNG timed out", provider="searxng") from exc
        except httpx.HTTPError as exc:
            raise Transient(f"SearXNG unreachable ({type(exc).__name__})",
                            provider="searxng") from exc
        status = response.status_code
        if status != 200:
            raise _signal_for(status, response)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
            kind = response.headers.get("content-type", "?").split(";")[0]
            raise Fatal(f"SearXNG at {self._base_url} answered {kind}, not its JSON results",
                        provider="searxng", status=status, hint=URL_HINT)
        return data


def _signal_for(status: int, response: httpx.Response) -> Signal:
    text = f"SearXNG HTTP {status}"
    if status == 403:
        return Fatal(text + " (json format disabled?)", provider="searxng", status=status,
                     hint=JSON_HINT)
    if status == 429:
        return RateLimited(text + " (the instance's limiter)", provider="searxng", status=status,
                           retry_after=_retry_after(response))
    if status >= 500:
        return Transient(text, provider="searxng", status=status)
    if status in (301, 302, 303, 307, 308):
        where = response.headers.get("location", "?")
        return Fatal(f"{text}: redirected to {where[:200]}", provider="searxng", status=status,
                     hint=URL_HINT)
    return Fatal(text, provider="searxng", status=status, hint=URL_HINT)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _result(item: Any, position: int) -> SearchResult | None:
    if not isinstance(item, dict):
        return None
    url = item.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme.lower() not in ("http", "https"):
        return None
    title = " ".join(str(item.get("title") or "").split()) or url
    snippet = " ".join(str(item.get("content") or "").split())
    return SearchResult(url=url, title=title, snippet=snippet, rank=position)


def _unresponsive(engines: Any) -> list[str]:
    """SearXNG lists failed engines as [name, reason] pairs."""
    out = []
    for entry in engines or []:
        if isinstance(entry, (list, tuple)) and entry:
            name = str(entry[0])
            reason = str(entry[1]) if len(entry) > 1 else "failed"
            out.append(f"{name} ({reason})"[:120])
    return out


def _csv(value: str | None) -> str | None:
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    return ",".join(names) or None
