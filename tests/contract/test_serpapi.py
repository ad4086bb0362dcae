"""SerpApiSearch with the real serpapi client against a loopback server speaking SerpAPI's JSON."""

from __future__ import annotations

import threading
import time
import traceback
from functools import partial
from urllib.parse import parse_qs, urlsplit

import pytest
import serpapi

from core.search.base import SearchBackend
from core.search.registry import make_search
from core.search.serpapi import SerpApiSearch
from core.search.web import fetch_page
from core.settings import Settings
from core.signals import Fatal, RateLimited, Signal, Transient
from tests.fakes.http import Recorded, Reply, ScriptedServer

KEY = "sk-serp-0123456789abcdef-SECRET"


def serp_body(*links: str) -> dict:
    """A trimmed but faithful SerpAPI google response."""
    return {
        "search_metadata": {"id": "66a0c0ffee", "status": "Success",
                            "json_endpoint": "https://serpapi.com/searches/x/66a0c0ffee.json",
                            "total_time_taken": 1.02},
        "search_parameters": {"engine": "google", "q": "asyncio event loop",
                              "google_domain": "google.com", "device": "desktop"},
        "search_information": {"organic_results_state": "Results for exact spelling",
                               "total_results": 1230000, "time_taken_displayed": 0.31},
        "related_questions": [{"question": "What is an event loop?", "snippet": "..."}],
        "organic_results": [
            {"position": i, "title": f"Result {i}", "link": link,
             "redirect_link": "https://www.google.com/url?sa=t&url=" + link,
             "displayed_link": link.split("//")[-1], "snippet": f"Snippet {i} about event loops.",
             "snippet_highlighted_words": ["event loops"], "source": "Example"}
            for i, link in enumerate(links, start=1)] + [{"position": 99, "title": "no link"}],
    }


def error(status: int, message: str) -> Reply:
    return Reply(status, {"error": message})


@pytest.fixture()
def server():
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture()
def backend(server: ScriptedServer) -> SerpApiSearch:
    return SerpApiSearch(KEY, base_url=server.url, timeout=5)


def _assert_key_hidden(exc: BaseException) -> None:
    printed = "".join(traceback.format_exception(exc))
    assert KEY not in printed and KEY not in repr(exc)


def test_organic_results_become_search_results(server: ScriptedServer,
                                               backend: SerpApiSearch) -> None:
    server.push(Reply(200, serp_body("https://docs.python.org/3/library/asyncio-eventloop.html",
                                     "https://realpython.com/async-io-python/",
                                     "https://example.org/three")))
    hits = backend.search("asyncio   event loop", k=2)
    assert isinstance(backend, SearchBackend)
    assert [(h.rank, h.url) for h in hits] == [
        (1, "https://docs.python.org/3/library/asyncio-eventloop.html"),
        (2, "https://realpython.com/async-io-python/")]
    assert hits[0].title == "Result 1" and hits[0].snippet == "Snippet 1 about event loops."
    sent = server.requests[0]
    query = parse_qs(urlsplit(sent.path).query)
    assert urlsplit(sent.path).path == "/search"
    assert query["q"] == ["asyncio event loop"] and query["engine"] == ["google"]
    assert query["api_key"] == [KEY] and query["num"] == ["2"]
    assert KEY not in repr(backend)


def test_empty_query_and_no_results(server: ScriptedServer, backend: SerpApiSearch) -> None:
    assert backend.search("   ") == [] and server.requests == []
    server.push(error(200, "Google hasn't returned any results for this query."))
    assert backend.search("zxqv nonsense") == []
    server.push(Reply(200, {"search_metadata": {"status": "Success"}}))
    assert backend.search("nothing organic") == []


@pytest.mark.parametrize("reply,kind,needle", [
    (error(401, "Invalid API key. Your API key should be here: "
                "https://serpapi.com/manage-api-key"), Fatal, "SERPAPI_API_KEY"),
    (error(429, "Your account has run out of searches."), Fatal, "out of searches"),
    (error(429, "Too many requests, slow down."), RateLimited, "Too many requests"),
    (error(200, "Unsupported `xx` location parameter."), Fatal, "location"),
    (error(503, "Our servers are busy, try again later."), Transient, "busy"),
    (Reply(502, "<html>Bad gateway</html>", {"content-type": "text/html"}), Transient, "502"),
])
def test_errors_map_to_signals_without_leaking_the_key(server: ScriptedServer,
                                                       backend: SerpApiSearch, reply: Reply,
                                                       kind: type, needle: str) -> None:
    server.push(reply)
    with pytest.raises(Signal) as info:
        backend.search("anything")
    assert type(info.value) is kind
    assert needle in str(info.value)
    assert info.value.provider == "serpapi"
    _assert_key_hidden(info.value)


def test_connection_refused_is_transient_and_masked() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = SerpApiSearch(KEY, base_url=f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(Transient) as info:
        backend.search("anything")
    assert info.value.__cause__ is not None
    _assert_key_hidden(info.value)


def test_timeout_is_transient(server: ScriptedServer) -> None:
    def slow(_: Recorded) -> Reply:
        time.sleep(1.5)
        return Reply(200, serp_body("https://example.org/late"))

    server.push(slow)
    with pytest.raises(Transient, match="timed out") as info:
        SerpApiSearch(KEY, base_url=server.url, timeout=0.3).search("slow")
    _assert_key_hidden(info.value)


def test_missing_key_is_fatal_with_hint() -> None:
    with pytest.raises(Fatal, match="SERPAPI_API_KEY"):
        SerpApiSearch("")


def test_base_url_is_per_backend_not_global() -> None:
    """Two backends on two servers, searching from threads at once, each hit their own."""
    with ScriptedServer(Reply(200, serp_body("https://a.example/"))) as a, \
            ScriptedServer(Reply(200, serp_body("https://b.example/"))) as b:
        backends = {"a": SerpApiSearch(KEY, base_url=a.url), "b": SerpApiSearch(KEY, base_url=b.url)}
        seen: dict[str, set[str]] = {"a": set(), "b": set()}

        def run(name: str) -> None:
            for _ in range(10):
                seen[name].add(backends[name].search("q", k=1)[0].url)

        threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b", "a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == {"a": {"https://a.example/"}, "b": {"https://b.example/"}}
        assert len(a.requests) == len(b.requests) == 20
    assert serpapi.Client.BASE_DOMAIN == "https://serpapi.com"
    assert serpapi.http.HTTPClient.BASE_DOMAIN == "https://serpapi.com"


def test_read_fetches_the_page_and_skips_refused_ones(server: ScriptedServer) -> None:
    # The page server is on loopback, which the fetcher refuses unless it is allowed.
    fetcher = partial(fetch_page, allow=urlsplit(server.url).netloc, respect_robots=False)
    backend = SerpApiSearch(KEY, base_url=server.url, timeout=5, fetcher=fetcher)
    article = ("<html><head><title>Loops</title></head><body><article><h1>Loops</h1>"
               "<p>The event loop runs callbacks one at a time, so code between awaits never "
               "races with other tasks on the same loop.</p><p>Blocking calls stall every "
               "task, so CPU-bound work belongs in an executor thread or process.</p>"
               "</article></body></html>")
    server.push(Reply(200, serp_body(server.url + "/article", server.url + "/paper.pdf")),
                Reply(200, article.encode(), {"content-type": "text/html; charset=utf-8"}),
                Reply(200, b"%PDF-1.7 ...", {"content-type": "application/pdf"}))
    page, pdf = backend.search("event loop", k=2)
    source = backend.read(page)
    assert source is not None and "runs callbacks one at a time" in source.text
    assert backend.read(pdf) is None


def test_registry_builds_serpapi_from_settings(server: ScriptedServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SERPAPI_API_KEY", "SERPAPI_KEY", "RESEARCHFLOW_SERPAPI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    settings = Settings(serpapi_api_key=KEY, serpapi_base_url=server.url, _env_file=None)
    backend = make_search(settings)
    assert isinstance(backend, SerpApiSearch)
    server.push(Reply(200, serp_body("https://example.org/one")))
    assert backend.search("q")[0].url == "https://example.org/one"
    with pytest.raises(Fatal, match="SERPAPI_API_KEY"):
        make_search(Settings(search="serpapi", _env_file=None))


# -- engines and locale ---------------------------------------------------------------------------

def _sent(server: ScriptedServer) -> dict[str, str]:
    """The last request's query string, one value per parameter."""
    query = parse_qs(urlsplit(server.requests[-1].path).query)
    assert all(len(v) == 1 for v in query.values()), query
    return {k: v[0] for k, v in query.items()}


@pytest.mark.parametrize("engine,locale,k,expected", [
    ("google", dict(location="Austin, Texas, United States", language="en", country="us"), 5,
     {"num": "5", "location": "Austin, Texas, United States", "hl": "en", "gl": "us"}),
    ("google", {}, 3, {"num": "3"}),
    ("bing", dict(location="Berlin, Germany", language="de", country="DE"), 7,
     {"count": "7", "location": "Berlin, Germany", "setlang": "de", "mkt": "de-DE"}),
    ("bing", dict(country="de"), 80, {"count": "50", "cc": "DE"}),
    ("bing", dict(language="fr"), 4, {"count": "4", "setlang": "fr"}),
    ("duckduckgo", dict(language="de", country="de"), 5, {"kl": "de-de"}),
    ("duckduckgo", dict(country="us"), 5, {"kl": "us-en"}),
    ("duckduckgo", dict(country="gb"), 5, {"kl": "uk-en"}),
    ("duckduckgo", dict(country="tw-tzh"), 5, {"kl": "tw-tzh"}),
    ("duckduckgo", dict(language="en"), 5, {}),
    ("google_scholar", dict(language="en", country="us", location="Boston"), 30,
     {"num": "20", "hl": "en"}),
    ("google_news", dict(language="fr", country="fr", location="Paris"), 5,
     {"hl": "fr", "gl": "fr"}),
])
def test_each_engine_gets_its_own_parameters(server: ScriptedServer, engine: str, locale: dict,
                                             k: int, expected: dict) -> None:
    backend = SerpApiSearch(KEY, base_url=server.url, timeout=5, engine=engine, **locale)
    server.push(Reply(200, {"search_metadata": {"status": "Success"}}))
    assert backend.search("  tokio   runtime ", k=k) == []
    sent = _sent(server)
    assert sent == {"engine": engine, "q": "tokio runtime", "api_key": KEY, **expected}
    assert backend.params == {"engine": engine, **{p: v for p, v in expected.items()
                                                   if p not in ("num", "count")}}
    assert KEY not in repr(backend) and KEY not in str(backend.params)


def test_params_are_the_engine_and_locale_only() -> None:
    backend = SerpApiSearch(KEY, engine=" Google ", language="en", country="US")
    assert backend.engine == "google"
    assert backend.params == {"engine": "google", "hl": "en", "gl": "us"}
    assert SerpApiSearch(KEY).params == {"engine": "google"}
    other = SerpApiSearch(KEY, language="de", country="de")
    assert other.params != backend.params  # another locale, another cache key


def test_unknown_engine_or_malformed_locale_is_fatal() -> None:
    with pytest.raises(Fatal) as info:
        SerpApiSearch(KEY, engine="yahoo")
    assert "yahoo" in str(info.value) and info.value.reason == "config"
    for engine in ("google", "bing", "duckduckgo", "google_scholar", "google_news"):
        assert engine in info.value.hint
    _assert_key_hidden(info.value)
    with pytest.raises(Fatal, match="country"):
        SerpApiSearch(KEY, country="United States")
    with pytest.raises(Fatal, match="country"):
        SerpApiSearch(KEY, country="us-en")  # a DuckDuckGo region is not a Google country
    with pytest.raises(Fatal, match="language"):
        SerpApiSearch(KEY, language="English")


def test_bing_and_duckduckgo_organic_results(server: ScriptedServer) -> None:
    for engine in ("bing", "duckduckgo"):
        backend = SerpApiSearch(KEY, base_url=server.url, timeout=5, engine=engine)
        server.push(Reply(200, {"organic_results": [
            {"position": 1, "title": "Tokio", "link": "https://tokio.rs/", "snippet": "Runtime."},
            {"position": 2, "title": "No link"},
            {"position": 3, "title": "Docs", "link": "https://docs.rs/tokio"}]}))
        hits = backend.search("tokio", k=5)
        assert [(h.rank, h.url, h.title, h.snippet) for h in hits] == [
            (1, "https://tokio.rs/", "Tokio", "Runtime."), (3, "https://docs.rs/tokio", "Docs", "")]


def test_news_results_become_search_results(server: ScriptedServer) -> None:
    server.push(Reply(200, {
        "search_metadata": {"status": "Success"},
        "search_parameters": {"engine": "google_news", "q": "rust 2024 edition", "gl": "us"},
        "news_results": [
            {"position": 1, "title": "Rust 2024 edition is out",
             "link": "https://blog.example/rust",
             "snippet": "The edition stabilises async closures.",
             "source": {"name": "Example Blog", "icon": "https://blog.example/i.png"},
             "date": "02/20/2025, 08:00 AM, +0000 UTC"},
            {"position": 2, "title": "Top stories", "stories": [
                {"position": 1, "title": "Rust ships", "link": "https://news.example/a",
                 "source": {"name": "News"}, "date": "02/21/2025"},
                {"position": 2, "title": "Editions explained", "link": "https://news.example/b",
                 "source": "Old-style source name"}]},
            {"position": 3, "title": "no link at all"},
        ]}))
    backend = SerpApiSearch(KEY, base_url=server.url, timeout=5, engine="google_news")
    hits = backend.search("rust 2024 edition", k=5)
    assert [(h.rank, h.url) for h in hits] == [(1, "https://blog.example/rust"),
                                                (2, "https://news.example/a"),
                                                (3, "https://news.example/b")]
    assert hits[0].title == "Rust 2024 edition is out"
    assert hits[0].snippet == ("Example Blog - 02/20/2025, 08:00 AM, +0000 UTC - "
                               "The edition stabilises async closures.")
    assert hits[1].snippet == "News - 02/21/2025" and hits[2].snippet == "Old-style source name"
    server.push(Reply(200, {"news_results": [
        {"title": f"N{i}", "link": f"https://n.example/{i}"} for i in range(30)]}))
    assert len(backend.search("many", k=4)) == 4  # no size parameter: cut to k here


def test_scholar_results_fall_back_to_their_first_resource(server: ScriptedServer) -> None:
    server.push(Reply(200, {"organic_results": [
        {"position": 0, "title": "Attention is all you need", "result_id": "5Gohgn6QFikJ",
         "link": "https://proceedings.example/7181-attention",
         "snippet": "The dominant sequence transduction models are based on ...",
         "publication_info": {"summary": "A Vaswani, N Shazeer - Advances in neural ..., 2017"},
         "resources": [{"title": "neurips.cc", "file_format": "PDF",
                        "link": "https://papers.example/7181.pdf"}]},
        {"position": 1, "title": "[CITATION] A paper with only a PDF", "result_id": "x",
         "snippet": "", "resources": [{"title": "arxiv.org", "file_format": "PDF",
                                       "link": "https://arxiv.example/1706.03762.pdf"}]},
        {"position": 2, "title": "[CITATION] Nothing to open", "result_id": "y"},
    ]}))
    backend = SerpApiSearch(KEY, base_url=server.url, timeout=5, engine="google_scholar")
    hits = backend.search("transformer attention", k=5)
    assert [h.url for h in hits] == ["https://proceedings.example/7181-attention",
                                     "https://arxiv.example/1706.03762.pdf"]
    assert hits[0].snippet.startswith("A Vaswani, N Shazeer - Advances in neural ..., 2017 - ")
    assert hits[0].snippet.endswith("are based on ...")
    assert len({h.rank for h in hits}) == 2
    assert _sent(server)["num"] == "5"


def test_engine_errors_keep_their_signals_and_mask_the_key(server: ScriptedServer) -> None:
    backend = SerpApiSearch(KEY, base_url=server.url, timeout=5, engine="google_news")
    server.push(error(401, "Invalid API key."))
    with pytest.raises(Fatal, match="SERPAPI_API_KEY") as info:
        backend.search("anything")
    _assert_key_hidden(info.value)
    server.push(error(200, "Google News hasn't returned any results for this query."))
    assert backend.search("zxqv") == []
