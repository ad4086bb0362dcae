"""Build the search backend a RunConfig asks for.

    search_for(config, pages, billing)   what a run searches with: the corpus, or a web search
                                         behind its meter (a ledger row per search) and, outside
                                         the meter, the search cache (a cached search is free)

    "corpus"  -> CorpusSearch over config.corpus_dir, or over the CPython docs materialized
                 under <cache_dir>/corpus/pydocs; its index lives at
                 <cache_dir>/index/<hash of the corpus path>.duckdb and is built on first search
    "serpapi" -> SerpApiSearch with the SerpAPI key (Fatal with a hint when unset), reading
                 pages through the guarded `Fetcher` (SSRF guard, deadlines, per-host limits,
                 robots.txt, PDFs) behind the page cache given as `pages`, so a page is fetched
                 once per `page_ttl_hours` across sub-questions, topics and runs
    "searxng" -> SearxngSearch on config.searxng_url (Fatal with a hint when unset), reading
                 pages through the same guarded, cached fetcher

Nothing here is kept between calls: a run's context (core.context) holds the backend of its
configuration, built once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from core.accounting.metering import Billing
from core.models import Vocabulary, stable_id
from core.search.base import SearchBackend
from core.search.cache import CachedFetcher, CachedSearch
from core.search.corpus import CorpusSearch
from core.search.metered import MeteredSearch
from core.search.pydocs import materialize_pydocs
from core.search.searxng import SearxngSearch, check_url
from core.search.serpapi import KEY_HINT, SerpApiSearch
from core.search.web import Fetcher, FetchPolicy
from core.settings import EnvironmentKeys, RunConfig, Settings, run_config
from core.store.pages import PageStore
from core.signals import Fatal


WEB_SEARCHES = ("serpapi", "searxng")  # search services that bill: a ledger row per search


def search_for(config: RunConfig, pages: PageStore, billing: Billing,
               keys: EnvironmentKeys | None = None) -> SearchBackend:
    """The search a run works with: the corpus, or a web search behind its meter and, outside
    the meter, the search cache (`pages`), so a search served from the cache is not billed.
    SerpAPI's key is what `keys` reads (default: the environment's)."""
    if config.search == "corpus":
        return corpus_search(config)
    backend = make_search(config, pages=pages, keys=keys)
    if config.search not in WEB_SEARCHES:
        return backend
    params = backend.params
    metered = MeteredSearch(backend, billing.ledger, billing.prices, billing.gate(config.search),
                            provider=config.search, memo=billing.memo)
    return CachedSearch(metered, pages, ttl_hours=config.page_ttl_hours, params=params)


def make_search(config: RunConfig | Settings, *, pages: PageStore | None = None,
                keys: EnvironmentKeys | None = None) -> SearchBackend:
    """The backend `config` names. Scripts and tests may pass Settings (with their own keys);
    `pages` is the web cache (None: a PageStore in the config's store)."""
    keys = keys or EnvironmentKeys()
    key = None
    if isinstance(config, Settings):
        key = config.serpapi_api_key
        config = run_config(config)
    if config.search == "corpus":
        return corpus_search(config)
    if config.search == "serpapi":
        key = key or keys.read("serpapi")
        secret = key.get_secret_value() if key else ""
        if not secret:
            raise Fatal("search=serpapi but no SerpAPI key is set", provider="serpapi",
                        hint=KEY_HINT + keys.elsewhere("serpapi"))
        return SerpApiSearch(secret, base_url=config.base_url("serpapi"),
                             fetcher=web_fetcher(config, pages), timeout=config.request_timeout,
                             engine=config.serpapi_engine, location=config.serpapi_location,
                             language=config.serpapi_language, country=config.serpapi_country)
    if config.search == "searxng":
        return SearxngSearch(check_url(config.searxng_url), fetcher=web_fetcher(config, pages),
                             timeout=config.request_timeout, engines=config.searxng_engines,
                             categories=config.searxng_categories,
                             language=config.searxng_language)
    raise Fatal(f"unknown search backend {config.search!r}",
                hint="use search=corpus, search=serpapi or search=searxng")


def web_fetcher(config: RunConfig, pages: PageStore | None = None) -> CachedFetcher:
    """The guarded page fetcher (SSRF guard, deadlines, robots.txt) behind the page cache."""
    store = pages if pages is not None else PageStore(config.db_path)
    return CachedFetcher(Fetcher(FetchPolicy.from_settings(config)), store,
                         ttl_hours=config.page_ttl_hours)


def corpus_location(config: RunConfig) -> tuple[Path, Path]:
    """(corpus folder, index file) of the configured corpus, materializing the default one."""
    cache_dir = Path(config.cache_dir).expanduser()
    if config.corpus_dir is not None:
        corpus_dir = Path(config.corpus_dir).expanduser().resolve()
        if not corpus_dir.is_dir():
            raise Fatal(f"corpus folder {corpus_dir} does not exist",
                        hint="set RESEARCHFLOW_CORPUS_DIR to a folder of .html, .md, .txt, "
                             ".pdf, .docx or .pptx files")
    else:
        corpus_dir = materialize_pydocs(cache_dir / "corpus" / "pydocs").resolve()
    return corpus_dir, (cache_dir / "index" / f"{stable_id(str(corpus_dir))}.duckdb").resolve()


def corpus_search(config: RunConfig | Settings) -> CorpusSearch:
    """A CorpusSearch for the configured corpus (a new instance: a run's context keeps one)."""
    if isinstance(config, Settings):
        config = run_config(config)
    corpus_dir, index_path = corpus_location(config)
    return CorpusSearch(corpus_dir, index_path, read_chars=min(config.max_source_chars, 20_000),
                        max_file_bytes=config.corpus_max_file_bytes,
                        max_html_bytes=config.corpus_max_html_bytes,
                        follow_symlinks=config.corpus_follow_symlinks,
                        allow_hardlinks=config.corpus_allow_hardlinks)


def vocabulary_of(backend: SearchBackend) -> Callable[[Sequence[str]], Vocabulary] | None:
    """What the backend can tell of a topic's words (core.relevance.subject): a corpus knows
    its own vocabulary; a web search does not."""
    return backend.vocabulary if isinstance(backend, CorpusSearch) else None
