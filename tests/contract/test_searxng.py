"""SearxngSearch against a loopback server speaking SearXNG's search API (format=json).

The bodies are shaped like a real instance's `/search?format=json` answer: query,
number_of_results, results[] with url/title/content/engine/engines/positions/score/category/
parsed_url/template/publishedDate, answers, corrections, infoboxes, suggestions,
unresponsive_engines. Errors are the instance's own: 403 when json is not in
search.formats, 429 from its limiter, an HTML page where the URL is not the instance root.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tasks import contexts
from core.models import SearchResult
from core.signals import Fatal, RateLimited, Transient
from core.search.base import SearchBackend
from core.search.fetch_types import PageFault
from core.search.registry import make_search
from core.search.searxng import SearxngSearch, check_url
from core.search.web import fetch_page
from core.settings import Settings, run_config
from core.store import query_readonly
from tests.fakes.http import Reply, ScriptedServer


def searx_body(*links: str, unresponsive: list | None = None) -> dict:
    return {
        "query": "asyncio event loop",
        "number_of_results": 0 if not links else 12300,
        "results": [
            {"url": link, "title": f"  Result\n{i} ", "content": f"Snippet {i}  about loops.",
             "engine": "duckduckgo", "engines": ["duckduckgo", "brave"], "positions": [i, i + 1],
             "score": 4.0 / i, "category": "general", "template": "default.html",
             "parsed_url": list(urlsplit(link)),
             "publishedDate": None, "thumbnail": "", "priority": ""}
            for i, link in enumerate(links, start=1)],
        "answers": [], "corrections": [], "suggestions": ["asyncio tutorial"],
        "infoboxes": [{"infobox": "Asyncio", "id": "https://en.wikipedia.org/wiki/Asyncio",
                       "content": "An infobox is not a result.", "urls": []}],
        "unresponsive_engines": unresponsive or [],
    }


@pytest.fixture()
def server():
    with ScriptedServer() as srv:
        yield srv


def test_results_become_search_results_in_order(server: ScriptedServer) -> None:
    server.push(Reply(200, searx_body("https://docs.python.org/3/library/asyncio.html",
                                      "javascript:alert(1)",  # never a result
                                      "https://docs.python.org/3/library/asyncio.html",  # twice
                                      "https://realpython.com/async-io-python/",
                                      "https://example.org/three")))
    backend = SearxngSearch(server.url + "/", timeout=5, engines=" duckduckgo, brave ",
                            categories="general", language="en")
    hits = backend.search("asyncio   event loop", k=2)
    assert isinstance(backend, SearchBackend)
    assert [(h.rank, h.url) for h in hits] == [
        (1, "https://docs.python.org/3/library/asyncio.html"),
        (2, "https://realpython.com/async-io-python/")]
    assert hits[0].title == "Result 1" and hits[0].snippet == "Snippet 1 about loops."
    sent = urlsplit(server.requests[0].path)
    assert sent.path == "/search"
    assert parse_qs(sent.query) == {"q": ["asyncio event loop"], "format": ["json"],
                                    "pageno": ["1"], "engines": ["duckduckgo,brave"],
                                    "categories": ["general"], "language": ["en"]}
    assert backend.params == {"url": server.url, "engines": "duckduckgo,brave",
                              "categories": "general", "language": "en"}


def test_nothing_found_is_empty_but_failed_engines_are_transient(server: ScriptedServer) -> None:
    backend = SearxngSearch(server.url, timeout=5)
    assert backend.search("   ") == [] and not server.requests  # nothing to ask
    server.push(Reply(200, searx_body()))
    assert backend.search("no such thing") == []
    server.push(Reply(200, searx_body(unresponsive=[["google", "Suspended: too many requests"],
                                                    ["brave", "timeout"]])))
    with pytest.raises(Transient, match="google .Suspended: too many requests.; brave"):
        backend.search("asyncio")


@pytest.mark.parametrize("reply, signal, says", [
    (Reply(403, "<html>Forbidden</html>", headers={"content-type": "text/html"}), Fatal,
     "formats"),
    (Reply(429, "Too Many Requests", headers={"retry-after": "7"}), RateLimited, "limiter"),
    (Reply(502, "Bad Gateway"), Transient, "HTTP 502"),
    (Reply(404, "Not Found"), Fatal, "HTTP 404"),
    (Reply(200, "<!DOCTYPE html><html>SearXNG</html>", headers={"content-type": "text/html"}),
     Fatal, "text/html"),
])
def test_instance_errors_become_signals(server: ScriptedServer, reply, signal, says) -> None:
    server.push(reply)
    with pytest.raises(signal) as caught:
        SearxngSearch(server.url, timeout=5).search("asyncio")
    assert says in str(caught.value) + (caught.value.hint or "")
    if signal is RateLimited:
        assert caught.value.retry_after == 7.0


def test_unreachable_instance_is_transient() -> None:
    with ScriptedServer() as gone:
        url = gone.url
    with pytest.raises(Transient, match="unreachable"):
        SearxngSearch(url, timeout=2).search("asyncio")


@pytest.mark.parametrize("url, says", [
    (None, "no SearXNG URL"), ("ftp://searx.lan", "not an http"),
    ("http://admin:hunter2@searx.lan", "credentials"), ("http://searx.lan/?q=x", "query"),
])
def test_a_bad_url_is_fatal_before_any_request(url, says) -> None:
    with pytest.raises(Fatal, match=says) as caught:
        check_url(url)
    assert "hunter2" not in str(caught.value)


def test_read_goes_through_the_guarded_fetcher(server: ScriptedServer, monkeypatch,
                                               tmp_path: Path) -> None:
    """A listed page on a private address is refused by the SSRF guard, never requested."""
    monkeypatch.setenv("RESEARCHFLOW_SEARCH", "searxng")
    monkeypatch.setenv("RESEARCHFLOW_SEARXNG_URL", server.url)
    monkeypatch.setenv("RESEARCHFLOW_DB_PATH", str(tmp_path / "store.duckdb"))
    backend = make_search(Settings.load())
    assert isinstance(backend, SearxngSearch)
    with ScriptedServer(default=Reply(200, "<html><p>secret</p></html>",
                                      headers={"content-type": "text/html"})) as private:
        assert backend.read(SearchResult(url=private.url + "/admin", title="admin")) is None
        assert private.requests == []


def test_a_listed_page_that_answers_503_is_a_fault_to_retry_not_a_page_without_text(
        server: ScriptedServer) -> None:
    """Before: SearXNG's read took a 503 for a refusal, so the page counted as 'no readable
    text' and was never asked again in the run (SerpAPI's read already raised PageFault)."""
    fetcher = partial(fetch_page, allow=urlsplit(server.url).netloc, respect_robots=False)
    backend = SearxngSearch(server.url, fetcher=fetcher)
    server.push(Reply(503, "busy", {"retry-after": "1"}),
                Reply(200, b"<html><body><article><p>The event loop runs callbacks one at a "
                           b"time, so code between awaits never races.</p></article></body>"
                           b"</html>", {"content-type": "text/html; charset=utf-8"}))
    hit = SearchResult(url=server.url + "/article", title="Loops")
    with pytest.raises(PageFault, match="HTTP 503") as caught:
        backend.read(hit)
    assert caught.value.retry_after == 1.0
    source = backend.read(hit)  # the retry reads the page
    assert source is not None and "runs callbacks one at a time" in source.text


def test_runtime_caches_and_records_every_search_at_no_cost(server: ScriptedServer,
                                                            monkeypatch, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    monkeypatch.setenv("RESEARCHFLOW_SEARXNG_URL", server.url)
    server.default = Reply(200, searx_body("https://example.org/a", "https://example.org/b"))
    settings = Settings.load(search="auto", db_path=db)
    assert settings.resolved_search() == "searxng"  # no SerpAPI key, a SearXNG URL
    config = run_config(settings)
    assert config.search == "searxng" and config.searxng_url == server.url
    contexts.close()
    try:
        search = contexts.context_for(config).search
        first = search.search("asyncio event loop", k=2)
        again = search.search("  Asyncio EVENT loop ", k=2)  # the same search, from the cache
        search.search("threads", k=2)
        contexts.flush()
    finally:
        contexts.close()
    assert first == again and len(server.requests) == 2
    _, rows = query_readonly(db, "SELECT provider, model, role, cost_usd FROM ledger")
    assert rows == [("searxng", "searxng", "search", 0.0)] * 2
