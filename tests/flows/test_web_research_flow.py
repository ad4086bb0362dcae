"""Real mode end to end on loopback: SerpAPI search, real pages through trafilatura, the openai SDK.

The search service, the web and the model are three servers on 127.0.0.1 speaking their real
wire formats. Among the pages: two articles, one far over the size limit, a PDF and a 404. The
topic must complete from the two articles alone, with every quote verbatim in stored page text,
and no key may reach DuckDB.
"""

from __future__ import annotations

import pytest

from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.flows.test_provider_faults_flow import FakeModel

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

SERP_KEY = "serp-SENTINEL-0123456789abcdef"
ARTICLE = """<html><head><title>{title}</title></head><body><nav>Home | Blog | About</nav>
<article><h1>{title}</h1>{paragraphs}</article><footer>Copyright 2026</footer></body></html>"""


def article(title: str, sentences: list[str]) -> str:
    return ARTICLE.format(title=title, paragraphs="".join(f"<p>{s}</p>" for s in sentences))


PAGES = {
    "/threads": article("Threads in practice", [
        "Threads in one process share memory, so a lock must guard data that two threads change.",
        "A thread that waits on a socket releases the interpreter lock while it waits.",
        "Starting a thread is cheaper than starting a process but costs more than a coroutine."]),
    "/asyncio": article("Asyncio in practice", [
        "Asyncio runs every coroutine on one event loop in a single thread.",
        "A coroutine yields control at each await, which lets thousands of sockets wait at once.",
        "A blocking call inside a coroutine stalls the whole event loop until it returns."]),
    "/huge": article("Huge page", ["Padding sentence number one for a page that is far too big."]
                     * 20_000),
}


def web(rec: Recorded) -> Reply:
    if rec.path in PAGES:
        return Reply(200, PAGES[rec.path], headers={"content-type": "text/html; charset=utf-8"})
    if rec.path == "/report.pdf":
        return Reply(200, b"%PDF-1.7 binary", headers={"content-type": "application/pdf"})
    return Reply(404, "not found", headers={"content-type": "text/html"})


def test_web_topic_completes_from_the_readable_pages(monkeypatch, db_path, tmp_path):
    model = FakeModel()
    with ScriptedServer(default=web) as site, ScriptedServer(default=model) as llm, \
            ScriptedServer() as serp:
        urls = [site.url + p for p in ("/threads", "/asyncio", "/huge", "/report.pdf", "/missing")]
        serp.default = Reply(200, {
            "search_metadata": {"status": "Success"},
            "organic_results": [{"position": i + 1, "title": f"Result {i}", "link": u,
                                 "snippet": "..."} for i, u in enumerate(urls)]})
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-web")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.url + "/v1")
        monkeypatch.setenv("SERPAPI_API_KEY", SERP_KEY)
        monkeypatch.setenv("RESEARCHFLOW_SERPAPI_BASE_URL", serp.url)
        monkeypatch.setenv("RESEARCHFLOW_MAX_PAGE_BYTES", "200000")
        monkeypatch.setenv("RESEARCHFLOW_RESULTS_PER_QUERY", "5")
        # The site is on loopback: only its own host:port may be fetched.
        monkeypatch.setenv("RESEARCHFLOW_FETCH_ALLOW_HOSTS", site.url.removeprefix("http://"))
        state = research_topic(topic="Compare threading and asyncio for waiting on sockets",
                               batch_id="web", options=TopicOptions(max_subquestions=2, max_rounds=1),
                               model="openai:gpt-4o-mini", search="serpapi",
                               db_path=str(db_path), return_state=True)
        assert serp.requests and all(SERP_KEY in r.path for r in serp.requests)  # key sent...

    assert state.is_completed(), state.message
    store = ResultStore(db_path)
    report_id = state.result()
    _, rows = query_readonly(db_path, "SELECT url, text FROM sources ORDER BY url")
    stored = {url.removeprefix(site.url): text for url, text in rows}
    assert set(stored) == {"/threads", "/asyncio"}  # huge, PDF and 404 were refused, not stored
    assert "Home | Blog" not in stored["/threads"] and "Copyright" not in stored["/threads"]
    report = store.get_report(report_id)
    assert report["citations"]
    assert store.unverified_citations(report_id) == []
    assert SERP_KEY.encode() not in db_path.read_bytes()  # ...but never stored
    # Searches are billed: each is a ledger row at SerpAPI's per-search price.
    _, searches = query_readonly(db_path, "SELECT provider, count(*), sum(cost_usd) FROM "
                                          "ledger WHERE role = 'search' GROUP BY provider")
    assert searches == [("serpapi", len(serp.requests), pytest.approx(0.015 * len(serp.requests)))]
