"""The web cache on real DuckDB files: one fetch per page and one search per query, across
PageStore instances (runs), threads and TTLs; refusals remembered. A store that cannot be used
and the schema's migration are in test_page_store.py.

The fetch function and the search backend are fakes that count their calls: the cache logic is
what is under test, and the counts and stored rows are what it promises.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from core.models import SearchResult, Source
from core.search.cache import CachedFetcher, CachedSearch, normalize_query, search_key
from core.search.web import PageRefused, PageUnavailable
from core.store import PageRecord, PageStore, query_readonly


def norm(url: str) -> str:
    """A stand-in for core.search.urls.normalize_url: host lowercased, fragment and trailing
    slash dropped."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/") or "/",
                       parts.query, ""))


class FakeFetch:
    """Counts calls per URL; answers a page, or raises what `outcomes` says for a URL."""

    def __init__(self, outcomes: dict[str, BaseException] | None = None, *,
                 sized: bool = False) -> None:
        self.calls: list[str] = []
        self.outcomes = outcomes or {}
        self.sized = sized
        self._lock = threading.Lock()

    def __call__(self, url: str) -> Source | tuple[Source, int]:
        with self._lock:
            self.calls.append(url)
        if url in self.outcomes:
            raise self.outcomes[url]
        source = Source(url=url + "?final", title=f"Title of {url}", text=f"Text of {url}.")
        return (source, 5_000) if self.sized else source


class FakeBackend:
    name = "fake"

    def __init__(self, answers: dict[str, list[SearchResult]] | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.reads: list[str] = []
        self.answers = answers or {}
        self.extra = "backend attribute"

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        self.calls.append((query, k))
        if query in self.answers:
            return self.answers[query]
        return [SearchResult(url=f"https://example.org/{i}", title=f"{query} {i}", rank=i + 1)
                for i in range(k)]

    def read(self, result: SearchResult) -> Source | None:
        self.reads.append(result.url)
        return Source(url=result.url, title=result.title, text="read")


def rows(path: Path, sql: str) -> list[tuple]:
    return query_readonly(path, sql)[1]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "rf.duckdb"


def fetcher(path: Path, fetch: FakeFetch, ttl_hours: float = 24.0, **kw: object
            ) -> CachedFetcher:
    return CachedFetcher(fetch, PageStore(path, **kw), ttl_hours=ttl_hours, key=norm)


# -- pages ------------------------------------------------------------------------------------

def test_second_fetch_of_the_same_key_is_a_hit(path: Path) -> None:
    fetch = FakeFetch()
    cached = fetcher(path, fetch)
    first = cached("https://Example.org/a/#intro")
    second = cached("https://example.org/a")
    assert fetch.calls == ["https://Example.org/a/#intro"]  # fetched at the URL asked
    assert first == second == Source(url="https://example.org/a",
                                     title="Title of https://Example.org/a/#intro",
                                     text="Text of https://Example.org/a/#intro.")
    size = len(first.text.encode())
    assert cached.stats() == {"fetches": 1, "hits": 1, "bytes_fetched": size,
                              "bytes_saved": size, "revalidated": 0}
    assert rows(path, "SELECT url, final_url, status, reason, title, bytes FROM pages") == [
        ("https://example.org/a", "https://Example.org/a/#intro?final", "ok", None,
         "Title of https://Example.org/a/#intro", size)]


def test_fetcher_can_say_how_many_bytes_it_downloaded(path: Path) -> None:
    cached = fetcher(path, FakeFetch(sized=True))
    cached("https://example.org/a")
    cached("https://example.org/a")
    assert (cached.bytes_fetched, cached.bytes_saved) == (5_000, 5_000)
    assert rows(path, "SELECT bytes FROM pages") == [(5_000,)]


def test_a_later_run_reuses_the_page(path: Path) -> None:
    fetch = FakeFetch()
    fetcher(path, fetch)("https://example.org/a")
    later = fetcher(path, fetch)  # another PageStore on the same file: the next run
    assert later("https://example.org/a").text == "Text of https://example.org/a."
    assert len(fetch.calls) == 1 and later.stats()["hits"] == 1 and later.fetches == 0


def test_a_stale_page_is_fetched_again(path: Path) -> None:
    store = PageStore(path)
    old = datetime.now(timezone.utc) - timedelta(hours=25)
    store.put_page("https://example.org/a", PageRecord(status="ok", title="Old", text="old text",
                                                       bytes=8, fetched_at=old))
    assert store.get_page("https://example.org/a", 24) is None
    assert store.get_page("https://example.org/a", 26).text == "old text"
    fetch = FakeFetch()
    cached = CachedFetcher(fetch, store, ttl_hours=24, key=norm)
    assert cached("https://example.org/a").text == "Text of https://example.org/a."
    assert cached.stats()["fetches"] == 1 and cached.hits == 0
    ((text, fetched_at),) = rows(path, "SELECT text, fetched_at FROM pages")
    assert text == "Text of https://example.org/a." and fetched_at > old  # replaced in place


def test_a_refused_page_is_remembered_and_never_fetched_again(path: Path) -> None:
    url = "https://example.org/file.pdf"
    fetch = FakeFetch({url: PageRefused(url, "not a web page (application/pdf)")})
    cached = fetcher(path, fetch)
    for attempt in range(3):
        with pytest.raises(PageRefused) as info:
            cached(url)
        assert not isinstance(info.value, PageUnavailable)
        assert info.value.reason == "not a web page (application/pdf)" and info.value.url == url
    with pytest.raises(PageRefused):
        fetcher(path, fetch)(url + "#again")  # a later run, the same page
    assert fetch.calls == [url]
    assert cached.stats() == {"fetches": 1, "hits": 2, "bytes_fetched": 0, "bytes_saved": 0,
                              "revalidated": 0}
    assert rows(path, "SELECT status, reason, text FROM pages") == [
        ("refused", "not a web page (application/pdf)", None)]


def test_an_unavailable_page_is_never_remembered(path: Path) -> None:
    """A 503 or a timeout may pass: the next ask fetches again, and nothing is stored that a
    later run (or the retry of this read) would take for the page's answer."""
    url = "https://down.example.org/"
    fetch = FakeFetch({url: PageUnavailable(url, "HTTP 503", retry_after=1.0)})
    cached = fetcher(path, fetch)
    for _ in range(2):
        with pytest.raises(PageUnavailable, match="HTTP 503") as info:
            cached(url)
        assert info.value.retry_after == 1.0
    assert len(fetch.calls) == 2 and cached.hits == 0
    assert rows(path, "SELECT status, reason FROM pages") == []

    # What an older version stored is read as a miss, whatever its age.
    store = PageStore(path)
    store.put_page(url, PageRecord(status="unavailable", reason="timed out",
                                   fetched_at=datetime.now(timezone.utc)))
    fetch.outcomes.clear()  # the host is back
    assert cached(url).text == f"Text of {url}."
    assert len(fetch.calls) == 3


def test_threads_asking_for_one_page_share_one_fetch(path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    class SlowFetch(FakeFetch):
        def __call__(self, url: str) -> Source | tuple[Source, int]:
            started.set()
            release.wait(10)
            return super().__call__(url)

    fetch = SlowFetch()
    cached = fetcher(path, fetch)
    got: list[Source] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            got.append(cached("https://example.org/a" + ("/" if i % 2 else "")))
        except BaseException as exc:  # noqa: BLE001 - reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    assert started.wait(10)
    time.sleep(0.2)  # the other seven are waiting on the first one's fetch
    release.set()
    for t in threads:
        t.join(10)
    assert errors == [] and len(got) == 8 and len(set(got)) == 1
    assert len(fetch.calls) == 1
    assert cached.fetches == 1 and cached.hits == 7


def test_a_refusal_is_shared_by_waiting_threads(path: Path) -> None:
    url = "https://example.org/big"
    started, release = threading.Event(), threading.Event()

    def fetch(u: str) -> Source:
        started.set()
        release.wait(10)
        raise PageRefused(u, "too big")

    cached = CachedFetcher(fetch, PageStore(path), ttl_hours=24, key=norm)
    reasons: list[str] = []

    def worker() -> None:
        try:
            cached(url)
        except PageRefused as exc:
            reasons.append(exc.reason)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    assert started.wait(10)
    time.sleep(0.2)
    release.set()
    for t in threads:
        t.join(10)
    assert reasons == ["too big"] * 4 and cached.fetches == 1 and cached.hits == 3


def test_an_unexpected_error_is_not_cached(path: Path) -> None:
    url = "https://example.org/a"
    fetch = FakeFetch({url: RuntimeError("bug")})
    cached = fetcher(path, fetch)
    with pytest.raises(RuntimeError, match="bug"):
        cached(url)
    assert rows(path, "SELECT count(*) FROM pages") == [(0,)]
    fetch.outcomes.clear()
    assert cached(url).title == f"Title of {url}" and len(fetch.calls) == 2


def test_ttl_zero_is_a_pass_through(path: Path) -> None:
    fetch = FakeFetch({"https://example.org/no": PageRefused("https://example.org/no", "403")})
    cached = fetcher(path, fetch, ttl_hours=0)
    assert cached("https://example.org/a/").url == "https://example.org/a"  # still the key
    cached("https://example.org/a/")
    for _ in range(2):
        with pytest.raises(PageRefused):
            cached("https://example.org/no")
    assert len(fetch.calls) == 4 and cached.fetches == 4 and cached.hits == 0
    assert rows(path, "SELECT count(*) FROM pages") == [(0,)]
    no_store = CachedFetcher(fetch, None, ttl_hours=24, key=norm)
    no_store("https://example.org/a")
    assert len(fetch.calls) == 5


# -- searches ---------------------------------------------------------------------------------

def test_search_cache_hits_misses_and_empty_results(path: Path) -> None:
    backend = FakeBackend({"nothing at all": []})
    store = PageStore(path)
    search = CachedSearch(backend, store, ttl_hours=24, params={"engine": "google", "gl": "us"})
    first = search.search("duckdb  locking", k=3)
    assert search.search(" DuckDB locking ", k=3) == first  # same normalised query: a hit
    assert len(first) == 3 and backend.calls == [("duckdb  locking", 3)]
    search.search("duckdb locking", k=5)  # another k: another search
    assert search.search("nothing at all") == [] == search.search("Nothing at all")
    assert search.stats() == {"searches": 3, "hits": 2}

    # Another run with the same locale reuses everything; another locale does not.
    later = CachedSearch(FakeBackend(), PageStore(path), ttl_hours=24,
                         params={"gl": "us", "engine": "google"})
    assert later.search("duckdb locking", k=3) == first and later.search("nothing at all") == []
    assert later.searches == 0 and later.hits == 2
    german = CachedSearch(FakeBackend(), PageStore(path), ttl_hours=24,
                          params={"engine": "google", "gl": "de"})
    german.search("duckdb locking", k=3)
    assert german.searches == 1

    stored = rows(path, "SELECT engine, query, json_array_length(results) FROM searches "
                        "ORDER BY query, 3")
    assert stored == [("fake", "duckdb  locking", 3), ("fake", "duckdb locking", 3),
                      ("fake", "duckdb locking", 5), ("fake", "nothing at all", 0)]
    key = search_key("fake", {"engine": "google", "gl": "us"}, "DUCKDB locking", 3)
    assert store.get_search(key, 24) == first
    assert normalize_query("  A\tB ") == "a b"


def test_stale_searches_are_searched_again_and_read_is_delegated(path: Path) -> None:
    backend = FakeBackend()
    store = PageStore(path)
    key = search_key("fake", {}, "q", 2)
    store.put_search(key, "fake", "q", [SearchResult(url="https://old.example/", title="old")],
                     fetched_at=datetime.now(timezone.utc) - timedelta(hours=30))
    search = CachedSearch(backend, store, ttl_hours=24)
    assert search.search("q", 2)[0].url == "https://example.org/0" and backend.calls == [("q", 2)]
    assert search.name == "fake" and search.extra == "backend attribute"
    result = search.search("q", 2)[0]
    assert search.read(result).text == "read" and backend.reads == [result.url]
    assert search.hits == 1 and search.searches == 1


def test_search_ttl_zero_and_errors_are_not_cached(path: Path) -> None:
    backend = FakeBackend()
    search = CachedSearch(backend, PageStore(path), ttl_hours=0)
    search.search("q")
    search.search("q")
    assert len(backend.calls) == 2 and rows(path, "SELECT count(*) FROM searches") == [(0,)]

    class Failing(FakeBackend):
        def search(self, query: str, k: int = 5) -> list[SearchResult]:
            self.calls.append((query, k))
            raise RuntimeError("quota")

    failing = Failing()
    cached = CachedSearch(failing, PageStore(path), ttl_hours=24)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            cached.search("q")
    assert len(failing.calls) == 2 and rows(path, "SELECT count(*) FROM searches") == [(0,)]


def test_threads_asking_one_query_share_one_search(path: Path) -> None:
    release = threading.Event()

    class Slow(FakeBackend):
        def search(self, query: str, k: int = 5) -> list[SearchResult]:
            release.wait(10)
            return super().search(query, k)

    backend = Slow()
    search = CachedSearch(backend, PageStore(path), ttl_hours=24)
    threads = [threading.Thread(target=search.search, args=("q", 2)) for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    release.set()
    for t in threads:
        t.join(10)
    assert len(backend.calls) == 1 and search.searches == 1 and search.hits == 4
