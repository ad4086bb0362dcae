"""Web search through SerpAPI, read through our own page fetcher.

`SerpApiSearch.search` calls the official `serpapi` client on one of SerpAPI's engines and maps
its results to SearchResult:

    engine          sent besides q                         results from
    google          num, location, hl, gl                  organic_results
    bing            count (at most 50), location,          organic_results
                    setlang, mkt (language-COUNTRY)
                    or cc (a country alone)
    duckduckgo      kl (a region: "us-en", "de-de")        organic_results
    google_scholar  num (at most 20), hl                   organic_results; a result without a
                                                           link gets its first resource's (a PDF)
    google_news     hl, gl                                 news_results; a cluster's stories
                                                           stand in for it

(hl and setlang carry the language, gl and cc the country.) A locale setting an engine has no
parameter for (location for news, country or location for scholar, a language without a
country for duckduckgo) is left out, with a warning in the log. `params` is the engine with
its locale as sent, never the key: part of a cache key for searches.

Errors become typed signals, once, here:

    bad or missing key (401/403), account out of searches, {"error": ...} in a 200
                                     -> Fatal, with a hint naming SERPAPI_API_KEY when it is the key
    429 throttling                   -> RateLimited
    5xx, connection errors, timeouts -> Transient
    "hasn't returned any results"    -> [] (an empty search is not an error)

The serpapi client puts the api key in the query string, and requests' exceptions quote the URL;
no message raised from here contains it (`_mask` scrubs the key from any text we keep), and the
original exception is chained as `__cause__` only after its args have been masked.

`read` and `refuses` are every web search's (core.search.web_search): the page through the
guarded fetcher, and why a result's page would be refused before any request.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import serpapi

from core.models import SearchResult
from core.search.web_search import Fetcher, WebSearch, listed
from core.signals import Fatal, RateLimited, Signal, Transient

log = logging.getLogger(__name__)

KEY_HINT = "set SERPAPI_API_KEY (or RESEARCHFLOW_SERPAPI_API_KEY) to a valid SerpAPI key"

ENGINES = ("google", "bing", "duckduckgo", "google_scholar", "google_news")
ENGINE_HINT = "the SerpAPI engine is one of: " + ", ".join(ENGINES)
SCHOLAR_MAX_NUM = 20  # Google Scholar pages hold at most 20 results
BING_MAX_COUNT = 50  # and Bing's at most 50
_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,4})?$")  # en, zh-CN, pt_BR
_COUNTRY = re.compile(r"^[A-Za-z]{2}$")  # us, de, uk
_DDG_REGION = re.compile(r"^[A-Za-z]{2}-[A-Za-z]{2,3}$")  # us-en, tw-tzh, wt-wt
# DuckDuckGo regions are country-language, but a few do not follow ISO codes:
# country -> (its language, its region).
_DDG_REGIONS = {"gb": ("en", "uk-en"), "uk": ("en", "uk-en"), "jp": ("ja", "jp-jp"),
                "kr": ("ko", "kr-kr"), "tw": ("zh", "tw-tzh"), "hk": ("zh", "hk-tzh")}
_ENGLISH_REGIONS = {"us", "au", "ca", "in", "ie", "nz", "sg", "za", "ph"}


class SerpApiSearch(WebSearch):
    name = "serpapi"

    def __init__(self, api_key: str, *, base_url: str | None = None,
                 fetcher: Fetcher | None = None, timeout: float = 30.0,
                 engine: str = "google", location: str | None = None,
                 language: str | None = None, country: str | None = None) -> None:
        if not api_key:
            raise Fatal("SerpAPI search needs an API key", provider="serpapi", hint=KEY_HINT)
        super().__init__(fetcher)
        self._api_key = api_key
        self._base_url = base_url.rstrip("/") if base_url else None
        self._timeout = timeout
        self._engine = _engine(engine)
        self._locale = _locale(self._engine, _blank(location), _language(language),
                               _country(country, self._engine))

    def __repr__(self) -> str:  # never show the key
        return f"SerpApiSearch(engine={self._engine!r}, base_url={self._base_url!r})"

    @property
    def engine(self) -> str:
        return self._engine

    @property
    def base_url(self) -> str | None:
        """The server searched (None: SerpAPI's own), for the call memo's fingerprint."""
        return self._base_url

    @property
    def params(self) -> dict[str, str]:
        """The engine and its locale parameters as sent (no key, no query): for a cache key."""
        return {"engine": self._engine, **self._locale}

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        query = " ".join(query.split())
        if not query:
            return []
        data = self._call(q=query, **self._size(max(k, 1)), **self._locale)
        if isinstance(data, serpapi.SerpResults):  # a UserDict, not a dict
            data = data.as_dict()
        if not isinstance(data, dict):
            raise Transient("SerpAPI returned a non-JSON answer", provider="serpapi")
        error = data.get("error")
        if error:
            if "hasn't returned any results" in str(error):
                return []
            raise self._signal_for(200, str(error))
        items = (_news_items(data.get("news_results")) if self._engine == "google_news"
                 else data.get("organic_results") or [])
        return listed(items, self._result, k)

    def _size(self, k: int) -> dict[str, int]:
        """How many results to ask for, in the engine's own parameter (if it has one)."""
        if self._engine == "google":
            return {"num": k}
        if self._engine == "google_scholar":
            return {"num": min(k, SCHOLAR_MAX_NUM)}
        if self._engine == "bing":
            return {"count": min(k, BING_MAX_COUNT)}
        return {}  # duckduckgo and google_news send a page of their own size; cut to k here

    def _result(self, item: Any, position: int) -> SearchResult | None:
        if not isinstance(item, dict):
            return None
        link = item.get("link")
        snippet = str(item.get("snippet") or "")
        if self._engine == "google_scholar":
            resources = [r for r in item.get("resources") or [] if isinstance(r, dict)]
            link = link or next((r.get("link") for r in resources if r.get("link")), None)
            summary = (item.get("publication_info") or {}).get("summary")
            snippet = " - ".join(filter(None, [str(summary or ""), snippet]))
        elif self._engine == "google_news":
            source = item.get("source")
            name = source.get("name") if isinstance(source, dict) else source
            snippet = " - ".join(filter(None, [str(name or ""), str(item.get("date") or ""),
                                               snippet]))
        if not link or not isinstance(link, str):
            return None
        # Scholar numbers from 0 and a news cluster's stories from 1 again: their order here is
        # their rank.
        given = str(item.get("position") or "")
        own = self._engine not in ("google_scholar", "google_news")
        rank = int(given) if own and given.isdigit() else position
        return SearchResult(url=link, title=str(item.get("title") or link), snippet=snippet,
                            rank=rank)

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


# ---- engine and locale ------------------------------------------------------------------------

def _blank(value: str | None) -> str | None:
    value = " ".join(value.split()) if isinstance(value, str) else value
    return value or None


def _engine(engine: str) -> str:
    name = (engine or "google").strip().lower()
    if name not in ENGINES:
        raise Fatal(f"unknown SerpAPI engine {engine!r}", provider="serpapi", reason="config",
                    hint=ENGINE_HINT)
    return name


def _language(language: str | None) -> str | None:
    language = _blank(language)
    if language is not None and not _LANGUAGE.match(language):
        raise Fatal(f"SerpAPI language {language!r} is not a language code", provider="serpapi",
                    reason="config", hint="use a two-letter language code such as en, de or zh-CN")
    return language


def _country(country: str | None, engine: str) -> str | None:
    country = _blank(country)
    if country is None:
        return None
    if _COUNTRY.match(country) or (engine == "duckduckgo" and _DDG_REGION.match(country)):
        return country.lower()
    hint = "use a two-letter country code such as us, de or fr"
    raise Fatal(f"SerpAPI country {country!r} is not a country code", provider="serpapi",
                reason="config", hint=hint + (" (or a DuckDuckGo region such as us-en)"
                                              if engine == "duckduckgo" else ""))


def _locale(engine: str, location: str | None, language: str | None,
            country: str | None) -> dict[str, str]:
    """The engine's own parameters for where and in what language to search."""
    base = language.replace("_", "-").split("-")[0].lower() if language else None
    out: dict[str, str | None] = {}
    if engine == "google":
        out = {"location": location, "hl": language, "gl": country}
    elif engine == "google_news":
        out = {"hl": language, "gl": country}
    elif engine == "google_scholar":
        out = {"hl": language}
    elif engine == "bing":
        market = f"{base}-{country.upper()}" if base and country else None
        out = {"location": location, "setlang": language, "mkt": market,
               "cc": country.upper() if country and not market else None}
    elif engine == "duckduckgo":
        out = {"kl": _ddg_region(country, base) if country else None}
    ignored = [name for name, value in (("location", location), ("language", language),
                                        ("country", country))
               if value and not _uses(engine, name, out)]
    if ignored:
        log.warning("SerpAPI engine %s has no parameter for %s: left out", engine,
                    " or ".join(ignored))
    return {k: v for k, v in out.items() if v}


def _uses(engine: str, setting: str, sent: dict[str, str | None]) -> bool:
    keys = {"location": ("location",), "language": ("hl", "setlang", "kl"),
            "country": ("gl", "mkt", "cc", "kl")}[setting]
    if engine == "duckduckgo" and setting == "language":
        return bool(sent.get("kl"))  # the region carries the language only with a country
    return any(sent.get(k) for k in keys)


def _ddg_region(country: str, language: str | None) -> str:
    """DuckDuckGo's kl: a region given as such, else country-language ("us-en", "de-de")."""
    if "-" in country:
        return country
    own, region = _DDG_REGIONS.get(country, (None, None))
    if region and language in (None, own):
        return region
    if language is None:
        language = "en" if country in _ENGLISH_REGIONS else country
    return f"{country}-{language}"


def _news_items(items: Any) -> list[Any]:
    """Google News results, a cluster's stories in its place (a cluster has no link)."""
    out: list[Any] = []
    for item in items or []:
        if isinstance(item, dict) and not item.get("link"):
            highlight = item.get("highlight")
            out += [highlight] if isinstance(highlight, dict) else []
            out += [s for s in item.get("stories") or [] if isinstance(s, dict)]
        else:
            out.append(item)
    return out
