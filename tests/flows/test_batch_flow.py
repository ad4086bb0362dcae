"""The batch flow: bad rows and failing topics are reported, the other topics still complete."""

from __future__ import annotations

import json

import pytest

from core.engine.offline.extractive import ExtractiveEngine
from core.signals import Fatal
from core.store import ResultStore, query_readonly
from flows.batch import research_batch
from tests.flows.prefect_api import artifacts, task_runs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_batch_reports_bad_rows_and_failed_topics_and_finishes_the_rest(
        corpus, db_path, tmp_path, monkeypatch):
    csv = tmp_path / "topics.csv"
    csv.write_text(
        "topic,max_subquestions,max_rounds\n"
        "How do threads share memory?,2,1\n"
        ",2,1\n"                                          # empty topic
        "How do processes exchange data?,ten,1\n"         # bad override
        "EXPLODE while planning this topic,2,1\n"         # fails at run time
        "Compare threading and asyncio for I/O-bound work,2,1\n", encoding="utf-8")

    real_plan = ExtractiveEngine.plan

    def plan(self, topic, **_):
        if topic.text.startswith("EXPLODE"):
            raise Fatal("planner refused this topic", hint="fix the topic text")
        return real_plan(self, topic)

    monkeypatch.setattr(ExtractiveEngine, "plan", plan)
    state = research_batch(csv_path=str(csv), batch_id="b1", model="offline", search="corpus",
                           corpus_dir=str(corpus), db_path=str(db_path), max_concurrency=2,
                           return_state=True)

    assert state.is_failed()  # loud: not a silent "Completed"
    assert "3 of 5 rows" in state.message or "3 of 5 rows" in str(_exc(state))
    _, rows = query_readonly(db_path, "SELECT topic, status, error, report_id FROM topics "
                                      "WHERE batch_id = 'b1' ORDER BY topic")
    by_topic = {r[0]: r for r in rows}
    assert by_topic["How do threads share memory?"][1] == "succeeded"
    assert by_topic["Compare threading and asyncio for I/O-bound work"][1] == "succeeded"
    failed = by_topic["EXPLODE while planning this topic"]
    assert failed[1] == "failed" and "planner refused" in failed[2] and failed[3] is None
    store = ResultStore(db_path)
    assert len(store.list_reports("b1")) == 2
    # An error never becomes a report.
    _, texts = query_readonly(db_path, "SELECT markdown FROM reports")
    assert not any("planner refused" in t for (t,) in texts)

    # The UI shows the closing table and the batch's progress.
    shown = artifacts(state.state_details.flow_run_id)
    table = next(a for a in shown if a.type == "table")
    assert table.key == "batch-b1"
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    # What a person scans first comes first: the UI hid cost and error behind the topic.
    assert list(rows[0])[:5] == ["row", "status", "topic", "cost_usd", "error"]
    assert sorted(r["status"] for r in rows) == ["failed", "invalid", "invalid", "succeeded",
                                                 "succeeded"]
    progress = next(a for a in shown if a.type == "progress")
    assert float(progress.data) == 100.0

    # The failed row is red in the batch's graph and Task Runs list, not only its subflow.
    rows_ran = {r.name: r.state.type.value for r in task_runs(state.state_details.flow_run_id)
                if r.name.startswith("row ")}
    assert rows_ran == {"row 2: How do threads share memory?": "COMPLETED",
                        "row 5: EXPLODE while planning this topic": "FAILED",
                        "row 6: Compare threading and asyncio for I/O-bound work": "COMPLETED"}
    _, (run,) = query_readonly(db_path, "SELECT status FROM runs WHERE run_id = ?",
                               [str(state.state_details.flow_run_id)])
    assert run == ("failed",)



def _exc(state):
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001
        return exc
