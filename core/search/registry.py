"""Pick the search backend the settings ask for.

    "corpus"  -> CorpusSearch over settings.corpus_dir, or over the CPython docs materialized
                 under <cache_dir>/corpus/pydocs; its index lives at
                 <cache_dir>/index/<hash of the corpus path>.duckdb and is built on first search
    "serpapi" -> SerpApiSearch with settings.serpapi_api_key (Fatal with a hint when unset),
                 reading pages through the guarded `Fetcher` (SSRF guard, deadlines, per-host
                 limits, robots.txt, PDFs) behind the DuckDB page cache, so a page is fetched
                 once per `page_ttl_hours` across sub-questions, topics and runs

One CorpusSearch is kept per index file in this process: DuckDB refuses a second connection to a
file with a different configuration, and one shared instance also indexes only once.
"""

from __future__ import annotations

import threading
from pathlib import Path

from core.models import stable_id
from core.search.base import SearchBackend
from core.search.corpus import CorpusSearch
from core.search.pydocs import materialize_pydocs
from core.search.cache import CachedFetcher
from core.search.serpapi import KEY_HINT, SerpApiSearch
from core.search.web import Fetcher, FetchPolicy
from core.settings import Settings
from core.store.pages import PageStore
from core.overflow.signals import Fatal

_corpora: dict[Path, CorpusSearch] = {}
_corpora_lock = threading.Lock()


def make_search(settings: Settings) -> SearchBackend:
    kind = settings.resolved_search()
    if kind == "corpus":
        return corpus_search(settings)
    if kind == "serpapi":
        key = settings.serpapi_api_key.get_secret_value() if settings.serpapi_api_key else ""
        if not key:
            raise Fatal("search=serpapi but no SerpAPI key is set", provider="serpapi",
                        hint=KEY_HINT)
        fetcher = CachedFetcher(Fetcher(FetchPolicy.from_settings(settings)),
                                page_store(settings), ttl_hours=settings.page_ttl_hours)
        return SerpApiSearch(key, base_url=settings.serpapi_base_url, fetcher=fetcher,
                             timeout=settings.request_timeout, engine=settings.serpapi_engine,
                             location=settings.serpapi_location,
                             language=settings.serpapi_language,
                             country=settings.serpapi_country)
    raise Fatal(f"unknown search backend {kind!r}", hint="use search=corpus or search=serpapi")


def page_store(settings: Settings) -> PageStore:
    """The page and search cache: tables of the results store itself, shared by every run."""
    return PageStore(Path(settings.db_path).expanduser().resolve())


def corpus_search(settings: Settings) -> CorpusSearch:
    """The shared CorpusSearch for the configured corpus (materializing the default one)."""
    cache_dir = Path(settings.cache_dir).expanduser()
    with _corpora_lock:
        if settings.corpus_dir is not None:
            corpus_dir = Path(settings.corpus_dir).expanduser().resolve()
            if not corpus_dir.is_dir():
                raise Fatal(f"corpus folder {corpus_dir} does not exist",
                            hint="set RESEARCHFLOW_CORPUS_DIR to a folder of .html/.md/.txt files")
        else:
            corpus_dir = materialize_pydocs(cache_dir / "corpus" / "pydocs").resolve()
        index_path = (cache_dir / "index" / f"{stable_id(str(corpus_dir))}.duckdb").resolve()
        backend = _corpora.get(index_path)
        if backend is None:
            backend = CorpusSearch(corpus_dir, index_path,
                                   read_chars=min(settings.max_source_chars, 20_000),
                                   max_file_bytes=settings.corpus_max_file_bytes,
                                   max_html_bytes=settings.corpus_max_html_bytes,
                                   follow_symlinks=settings.corpus_follow_symlinks)
            _corpora[index_path] = backend
        return backend
