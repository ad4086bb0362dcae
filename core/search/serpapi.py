"""Web search through SerpAPI (Google results), read through our own page fetcher.

`SerpApiSearch.search` calls the official `serpapi` client and maps `organic_results` to
SearchResult. Its errors become typed signals, once, here:

    bad or missing key (401/403), account out of searches, {"error": ...} in a 200
                                     -> Fatal, with a hint naming SERPAPI_API_KEY when it is the key
    429 throttling                   -> RateLimited
    5xx, connection errors, timeouts -> Transient
    "hasn't returned any results"    -> [] (an empty search is not an error)

The serpapi client puts the api key in the query string, and requests' exceptions quote the URL;
no message raised from here contains it (`_mask` scrubs the key from any text we keep), and the
original exception is chained as `__cause__` only after its args have been masked.

`read` fetches the page with `web.fetch_page` and returns None for a page that cannot be read.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import serpapi

from core.models import SearchResult, Source
from core.search.web import PageRefused, fetch_page
from core.overflow.signals import Fatal, RateLimited, Signal, Transient

log = logging.getLogger(__name__)

KEY_HINT = "set SERPAPI_API_KEY (or RESEARCHFLOW_SERPAPI_API_KEY) to a valid SerpAPI key"
Fetcher = Callable[[str], Source]


class SerpApiSearch:
    name = "serpapi"

    def __init__(self, api_key: str, *, base_url: str | None = None,
                 fetcher: Fetcher | None = None, timeout: float = 30.0,
                 engine: str = "google") -> None:
        if not api_key:
            raise Fatal("SerpAPI search needs an API key", provider="serpapi", hint=KEY_HINT)
        self._api_key = api_key
        self._base_url = base_url.rstrip("/") if base_url else None
        self._fetch = fetcher or fetch_page
        self._timeout = timeout
        self._engine = engine

    def __repr__(self) -> str:  # never show the key
        return f"SerpApiSearch(base_url={self._base_url!r})"

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        query = " ".join(query.split())
        if not query:
            return []
        data = self._call(q=query, num=max(k, 1))
        if isinstance(data, serpapi.SerpResults):  # a UserDict, not a dict
            data = data.as_dict()
        if not isinstance(data, dict):
            raise Transient("SerpAPI returned a non-JSON answer", provider="serpapi")
        error = data.get("error")
        if error:
            if "hasn't returned any results" in str(error):
                return []
            raise self._signal_for(200, str(error))
        results = []
        for item in data.get("organic_results") or []:
            link = item.get("link")
            if not link:
                continue
            results.append(SearchResult(url=link, title=item.get("title") or link,
                                        snippet=item.get("snippet") or "",
                                        rank=int(item.get("position") or len(results) + 1)))
            if len(results) >= k:
                break
        return results

    def read(self, result: SearchResult) -> Source | None:
        try:
            return self._fetch(result.url)
        except PageRefused as exc:
            log.info("skipping page %s", exc)
            return None

    # ---- the SerpAPI call and its errors ----------------------------------------------------

    def _client(self) -> serpapi.Client:
        # One client per call: requests.Session is not guaranteed thread-safe, and the base URL
        # is set on this instance only (the class attribute is shared by every thread).
        client = serpapi.Client(api_key=self._api_key, timeout=self._timeout)
        if self._base_url:
            client.BASE_DOMAIN = self._base_url
        return client

    def _call(self, **params: Any) -> Any:
        client = self._client()
        try:
            return client.search(engine=self._engine, **params)
        except serpapi.HTTPConnectionError as exc:
            raise self._masked(Transient(f"SerpAPI unreachable ({type(exc).__name__})",
                                         provider="serpapi"), exc)
        except serpapi.TimeoutError as exc:
            raise self._masked(Transient("SerpAPI timed out", provider="serpapi"), exc)
        except serpapi.HTTPError as exc:
            message = str(exc.error) if getattr(exc, "error", None) else ""
            raise self._masked(self._signal_for(exc.status_code, message), exc)
        except (serpapi.SerpApiError, OSError) as exc:
            raise self._masked(Transient(f"SerpAPI call failed ({type(exc).__name__})",
                                         provider="serpapi"), exc)
        finally:
            client.session.close()

    def _signal_for(self, status: int, message: str) -> Signal:
        message = self._mask(message) or f"HTTP {status}"
        text = f"SerpAPI: {message}"
        lowered = message.lower()
        if status in (401, 403) or "invalid api key" in lowered or "api key" in lowered:
            return Fatal(text, provider="serpapi", status=status, hint=KEY_HINT)
        if "out of searches" in lowered:
            return Fatal(text, provider="serpapi", status=status,
                         hint="the SerpAPI account is out of searches: upgrade the plan or "
                              "wait for the monthly reset, or use --search corpus")
        if status == 429:
            return RateLimited(text, provider="serpapi", status=status)
        if status >= 500 or status < 0:
            return Transient(text, provider="serpapi", status=status)
        return Fatal(text, provider="serpapi", status=status)

    def _masked(self, signal: Signal, exc: BaseException) -> Signal:
        """Scrub the key out of the original exception, and out of the exceptions it was raised
        from (requests quotes the full URL at each level), before chaining it as __cause__."""
        seen: set[int] = set()
        link: BaseException | None = exc
        while link is not None and id(link) not in seen:
            seen.add(id(link))
            link.args = tuple(self._mask(str(a)) for a in link.args)
            link = link.__cause__ or link.__context__
        signal.__cause__ = exc
        signal.__suppress_context__ = True
        return signal

    def _mask(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text
