"""Provider faults inside a real flow run: the real openai SDK against a loopback server.

The fake model answers each engine role from what it was sent; a fault can be injected once for
a role. An overflow in compress or in the report is recovered inside the task (one task run, no
Prefect retry); a 429 is retried by Prefect with backoff; a 401 fails the task at once with a
clear message. The API key used here must never reach DuckDB, Prefect results or the logs.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from core.models import TopicOptions
from core.store import ResultStore
from flows.topic import research_topic
from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.fakes.research_provider import report_markdown
from tests.flows.prefect_api import task_runs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

SECRET = "sk-test-SENTINEL-9f8e7d6c5b4a"
ROLES = {"planner of a research team": "plan", "Choose which pages to read": "choose",
         "direct a web researcher": "controller", "pick the evidence on one web page": "condense",
         "compressing a researcher's working notes": "compress",
         "keep a researcher's memory short": "checkpoint", "You lead a research team": "review",
         "write a research report": "report", "rescue a web researcher's searches": "rewrite"}


class FakeModel:
    """Chat Completions that answer by role, with one injected fault per role when asked."""

    def __init__(self) -> None:
        self.faults: dict[str, Reply] = {}
        self.calls: dict[str, int] = {}
        self.times: dict[str, list[float]] = {}  # monotonic time of each call, by role

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json()
        role = next((r for k, r in ROLES.items() if k in body["messages"][0]["content"]), "?")
        self.calls[role] = self.calls.get(role, 0) + 1
        self.times.setdefault(role, []).append(time.monotonic())
        if role in self.faults:
            fault = self.faults.pop(role)
            return fault(body) if callable(fault) else fault
        try:
            text = self.answer(role, body)
        except Exception as exc:  # noqa: BLE001 - a broken fake must say so, not hang up
            import traceback
            traceback.print_exc()
            return Reply(599, {"error": {"message": f"fake model broke: {exc!r}"}})
        # Usage as the provider would count it: the engine calibrates its estimator from it.
        return fake.success_reply("openai", text,
                                  input_tokens=fake.estimate_tokens("openai", body))

    def answer(self, role: str, body: dict[str, Any]) -> str:
        last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        if role == "plan":
            return json.dumps({"brief": "Threads vs coroutines.", "intent": "compare",
                               "targets": ["threading", "asyncio"], "subquestions": [
                {"question": f"How do threading and asyncio differ in {d}?",
                 "queries": [f"threading asyncio {d}"]} for d in ("memory", "blocking")]})
        if role == "choose":  # every result
            return json.dumps({"read": [int(n) for n in re.findall(r"^(\d+)\. ", last, re.M)]})
        if role == "controller":
            return json.dumps({"enough": True, "queries": []})
        if role == "review":
            return json.dumps({"done": True, "followups": []})
        if role == "rewrite":  # searches that found nothing readable, asked more specifically
            return json.dumps({"queries": ["threading asyncio explained"]})
        if role == "condense":  # the page's sentences, by number
            ids = re.findall(r"^\[(\d+)\] [A-Z][^.\n]{20,}\.$", last, re.M)
            return json.dumps({"ids": [int(i) for i in ids[:12]], "note": ""})
        if role == "compress":
            notes = [m["content"] for m in body["messages"] if m["role"] == "tool"
                     and m["content"].startswith("Source:")]
            if not notes:  # the shrink dropped the reading round: nothing to quote
                return json.dumps({"claims": []})
            claims = []
            for note in notes:
                url = re.search(r"<([^>]+)>", note).group(1)
                note = "\n".join(line for line in note.splitlines() if not line.startswith("("))
                claims += [{"text": f"The source says: {line.lstrip('- ')}",
                            "confidence": "medium",
                            "evidence": [{"url": url, "quote": line.lstrip("- ")}]}
                           for line in note.splitlines()[1:] if line.strip()]
            return json.dumps({"claims": claims})
        if role == "report":
            return report_markdown(last, chinese=False)
        return "Summary of earlier research."


def overflow_by(share: float):
    """The provider's real overflow for this very request: over the window by `share` of the
    part that can shrink (the findings of a report, the tool results of a transcript), so a
    correct cut fits and a blind one may not."""
    def reply(body: dict[str, Any]) -> Reply:
        tokens = fake.estimate_tokens("openai", body)
        out = fake.requested_max_tokens("openai", body)
        messages = body["messages"]
        shrinkable = (messages[-1]["content"].split("Findings:", 1)[-1]
                      if "Findings:" in messages[-1]["content"]
                      else "".join(m["content"] for m in messages if m["role"] == "tool"))
        over = int(len(shrinkable.encode()) / 3 * share)
        return fake.overflow_reply("openai", window=tokens + out - over, input_tokens=tokens,
                                   max_tokens=out)
    return reply


@pytest.fixture()
def model(monkeypatch):
    fm = FakeModel()
    with ScriptedServer(default=fm) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        monkeypatch.setenv("RESEARCHFLOW_MAX_OUTPUT_TOKENS", "300")  # windows here are small
        yield fm


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """Pages long enough that tool results, not prompts, fill the context (as on the web)."""
    folder = tmp_path / "pages"
    folder.mkdir()
    for name, subject, verb in (("threads.md", "Threading", "switches threads"),
                                ("asyncio.md", "Asyncio", "switches coroutines"),
                                ("blocking.md", "Blocking in threading and asyncio", "blocks")):
        lines = [f"# {subject}", ""] + [
            f"{subject} example {i} shows that the runtime {verb} when a task waits on "
            f"input or output for {i * 7 + 3} milliseconds in threading and asyncio programs."
            for i in range(40)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _run(corpus: Path, db_path: Path, topic: str):
    return research_topic(topic=topic, batch_id="faults",
                          options=TopicOptions(max_subquestions=2, max_rounds=1),
                          model="openai:gpt-4o-mini", search="corpus", corpus_dir=str(corpus),
                          db_path=str(db_path), return_state=True)


def _task_runs(flow_run_id) -> dict[str, Any]:
    return {r.name: r for r in task_runs(flow_run_id)}


@pytest.mark.parametrize("role", ["compress", "report"])
def test_overflow_is_recovered_inside_the_task_without_a_prefect_retry(role, model, corpus,
                                                                       db_path):
    # One role per run: a provider has one window, and what an overflow teaches (limits.learn)
    # must not be contradicted by a second injected overflow claiming another window.
    model.faults[role] = overflow_by(0.3)
    state = _run(corpus, db_path, f"Compare threading and asyncio (overflow in {role})")
    assert state.is_completed(), state.message
    runs = _task_runs(state.state_details.flow_run_id)
    recovered = [r for n, r in runs.items() if n.startswith(role[:6])]
    assert recovered and all(r.run_count == 1 and r.state.is_completed() for r in recovered)
    # Exactly one failed call: compress is one call per sub-question (2) plus the failed one;
    # at this output cap the report is written section by section (2 sections + the parts
    # around them), plus the failed first call.
    expected = {"compress": 3, "report": 4}[role]
    assert model.calls[role] == expected, model.calls
    report = ResultStore(db_path).get_report(state.result())
    assert report["citations"] and "[1]" in report["markdown"]
    assert ResultStore(db_path).unverified_citations(state.result()) == []


def test_rate_limit_is_retried_by_prefect_with_backoff(model, corpus, db_path, real_backoff):
    model.faults["plan"] = fake.rate_limit_error("openai", retry_after=1)
    state = _run(corpus, db_path, "Compare threading and asyncio (rate limited)")
    assert state.is_completed(), state.message
    plan_run = next(r for n, r in _task_runs(state.state_details.flow_run_id).items()
                    if n.startswith("plan:"))
    assert plan_run.run_count == 2 and model.calls["plan"] == 2
    first, second = model.times["plan"]
    assert second - first >= 0.95  # the 2 s backoff (+-50%) covers the 1 s retry-after


def test_bad_key_fails_at_once_with_a_clear_message(model, corpus, db_path):
    model.faults["plan"] = fake.auth_error("openai", api_key=SECRET)
    state = _run(corpus, db_path, "Compare threading and asyncio (bad key)")
    assert state.is_failed()
    plan_run = next(r for n, r in _task_runs(state.state_details.flow_run_id).items()
                    if n.startswith("plan:"))
    assert plan_run.run_count == 1 and model.calls["plan"] == 1  # no retry
    assert "OPENAI_API_KEY" in state.message
    assert SECRET not in state.message


def test_the_key_never_reaches_duckdb_results_or_logs(model, corpus, db_path, session_dir,
                                                       caplog):
    state = _run(corpus, db_path, "Compare threading and asyncio (secrets)")
    assert state.is_completed(), state.message
    assert SECRET.encode() not in db_path.read_bytes()
    for path in (session_dir / "prefect-results").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text
