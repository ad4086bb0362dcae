"""A topic in web mode through SearXNG, end to end on loopback.

The instance, the web and the model are servers on 127.0.0.1 speaking their real wire formats
(SearXNG's format=json, HTML pages, the OpenAI API). The instance lists two articles, a 404 and
a page on a second loopback server that is not on the allow-list: the SSRF guard must refuse
that one without sending it a request. Every quote is verbatim in stored page text, and every
search is a ledger row of provider "searxng" that costs nothing.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from tests.contract.test_searxng import searx_body
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.flows.test_provider_faults_flow import FakeModel
from tests.flows.test_web_research_flow import PAGES

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def web(rec: Recorded) -> Reply:
    if rec.path in PAGES:
        return Reply(200, PAGES[rec.path], headers={"content-type": "text/html; charset=utf-8"})
    return Reply(404, "not found", headers={"content-type": "text/html"})


def test_web_topic_through_searxng(monkeypatch, db_path) -> None:
    model = FakeModel()
    private = Reply(200, "<html><p>internal admin page</p></html>",
                    headers={"content-type": "text/html"})
    with ScriptedServer(default=web) as site, ScriptedServer(default=model) as llm, \
            ScriptedServer(default=private) as intranet, ScriptedServer() as searx:
        urls = [site.url + p for p in ("/threads", "/asyncio", "/missing")] + [
            intranet.url + "/admin"]
        searx.default = Reply(200, searx_body(*urls))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-searxng")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.url + "/v1")
        monkeypatch.setenv("RESEARCHFLOW_SEARXNG_URL", searx.url)
        monkeypatch.setenv("RESEARCHFLOW_SEARXNG_ENGINES", "duckduckgo,brave")
        monkeypatch.setenv("RESEARCHFLOW_RESULTS_PER_QUERY", "4")
        monkeypatch.setenv("RESEARCHFLOW_FETCH_ALLOW_HOSTS", site.url.removeprefix("http://"))
        state = research_topic(topic="Compare threading and asyncio for waiting on sockets",
                               batch_id="searxng", model="openai:gpt-4o-mini", search="searxng",
                               db_path=str(db_path), return_state=True,
                               options=TopicOptions(max_subquestions=2, max_rounds=1))
        assert intranet.requests == []  # listed, refused by the guard, never asked
        searches = [parse_qs(urlsplit(r.path).query) for r in searx.requests]

    assert state.is_completed(), state.message
    assert searches and all(q["format"] == ["json"] and q["engines"] == ["duckduckgo,brave"]
                            for q in searches)
    _, rows = query_readonly(db_path, "SELECT url FROM sources ORDER BY url")
    assert {url.removeprefix(site.url) for (url,) in rows} == {"/threads", "/asyncio"}
    store = ResultStore(db_path)
    report_id = state.result()
    assert store.get_report(report_id)["citations"]
    assert store.unverified_citations(report_id) == []
    _, ledger = query_readonly(db_path, "SELECT provider, count(*), sum(cost_usd) FROM ledger "
                                        "WHERE role = 'search' GROUP BY provider")
    assert ledger == [("searxng", len(searches), 0.0)]
