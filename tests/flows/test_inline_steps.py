"""Searches and page fetches run in-line in the research task (tasks/research.py); one that fails
for a passing reason becomes a task run that Prefect retries. Real mode on loopback: SerpAPI
answers its first search with a 503 and the site its first read of a page with a 503; the topic
completes with that page read, each failed request made again once and no successful one
repeated."""

from __future__ import annotations

import threading
import time

import pytest

from core.models import TopicOptions
from core.store import query_readonly
from flows.topic import research_topic
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.flows.test_provider_faults_flow import FakeModel
from tests.flows.test_web_research_flow import PAGES, article

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


class OnceDown:
    """A handler that answers 503 to its first request for `path` (any, when None)."""

    def __init__(self, answer, path: str | None = None) -> None:
        self.answer, self.path = answer, path
        self.failed: list[str] = []
        self.answered: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, rec: Recorded) -> Reply:
        with self._lock:
            down = (not self.failed and (self.path is None or rec.path == self.path))
            (self.failed if down else self.answered).append(rec.path)
        if down:
            return Reply(503, {"error": "try again later"}, headers={"retry-after": "0"})
        return self.answer(rec)


def test_a_search_and_a_page_that_fail_once_are_retried_as_task_runs(monkeypatch, db_path):
    model = FakeModel()
    pages = {"/threads": PAGES["/threads"], "/asyncio": PAGES["/asyncio"],
             "/more": article("More", ["A coroutine waits on a socket without a thread."])}
    site = OnceDown(lambda rec: Reply(200, pages[rec.path], headers={
        "content-type": "text/html; charset=utf-8"}) if rec.path in pages
        else Reply(404, "not found"), path="/threads")
    with ScriptedServer(default=site) as web, ScriptedServer(default=model) as llm, \
            ScriptedServer() as serp_server:
        results = Reply(200, {"search_metadata": {"status": "Success"}, "organic_results": [
            {"position": i + 1, "title": f"Result {i}", "link": web.url + p, "snippet": "..."}
            for i, p in enumerate(pages)]})
        serp = OnceDown(lambda rec: results)
        serp_server.default = serp
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-inline")
        monkeypatch.setenv("OPENAI_BASE_URL", llm.url + "/v1")
        monkeypatch.setenv("SERPAPI_API_KEY", "serp-inline-0123456789")
        monkeypatch.setenv("RESEARCHFLOW_SERPAPI_BASE_URL", serp_server.url)
        monkeypatch.setenv("RESEARCHFLOW_FETCH_ALLOW_HOSTS", web.url.removeprefix("http://"))
        state = research_topic(topic="Compare threading and asyncio for waiting on sockets",
                               batch_id="inline", options=TopicOptions(max_subquestions=1,
                                                                       max_rounds=1,
                                                                       max_waves=1),
                               model="openai:gpt-4o-mini", search="serpapi",
                               db_path=str(db_path), return_state=True)
        assert state.is_completed(), state.message
        assert len(serp.failed) == 1 and serp.answered  # the 503 search was asked again
        assert site.failed == ["/threads"] and "/threads" in site.answered
        # No successful search was made twice: the retry is of the failed one only.
        assert len(serp.answered) == len(set(serp.answered))
    # The failed steps became task runs of their own; the research task itself ran once. Task
    # runs reach the API as batched events: read them once both retried steps have arrived.
    runs = _settled_task_runs(state.state_details.flow_run_id)
    assert [n for n, _ in runs if n.startswith("search")] != []
    assert [n for n, _ in runs if n.startswith("fetch")] != []
    assert [count for n, count in runs if n.startswith("research")] == [1]
    assert len([n for n, _ in runs if n.startswith(("search", "fetch"))]) == 2  # only those
    _, rows = query_readonly(db_path, "SELECT url FROM sources")
    assert web.url + "/threads" in {url for (url,) in rows}  # read on its retry
    _, ledger = query_readonly(db_path, "SELECT outcome, count(*) FROM ledger WHERE "
                                        "role = 'search' GROUP BY outcome ORDER BY outcome")
    assert dict(ledger)["ok"] == len(serp.answered) and dict(ledger)["Transient"] == 1


def _settled_task_runs(flow_run_id, seconds: float = 15.0) -> list[tuple[str, int]]:
    deadline = time.monotonic() + seconds
    while True:
        runs = _task_runs(flow_run_id)
        names = [n for n, _ in runs]
        if (any(n.startswith("search") for n in names) and any(n.startswith("fetch")
                                                               for n in names)) \
                or time.monotonic() > deadline:
            return runs
        time.sleep(0.3)


def _task_runs(flow_run_id) -> list[tuple[str, int]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[flow_run_id])), limit=200)
    return [(r.name, r.run_count) for r in runs]
