"""Whatever a topic or a batch raises, its `runs` row is finished with the right status, a
batch reaches its closing table, and an expected failure is one log line without a traceback,
in this process and in a served or worker's run (`python -m prefect.flow_engine`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.store import query_readonly
from tests.fakes.rerun_scenario import ROOT

pytestmark = [pytest.mark.usefixtures("prefect_harness")]

ANSWERED = "How do threads share memory?"
NO_PAGE = "How do pelicans migrate across the ocean?"  # no page of the corpus is about it


def _topic(text: str, corpus: Path, db_path: Path):
    from flows.topic import research_topic

    return research_topic(topic=text, model="offline", search="corpus", corpus_dir=str(corpus),
                          db_path=str(db_path), return_state=True)


def _run_row(db_path: Path, state) -> tuple[str, ...]:
    _, rows = query_readonly(db_path, "SELECT status, finished_at IS NOT NULL FROM runs "
                                      "WHERE run_id = ?", [str(state.state_details.flow_run_id)])
    return rows[0]


def _topic_row(db_path: Path) -> tuple[str, str]:
    _, rows = query_readonly(db_path, "SELECT status, coalesce(error, '') FROM topics")
    return rows[0]


def test_a_failure_after_the_report_is_stored_does_not_fail_the_topic(corpus, db_path,
                                                                       monkeypatch):
    import flows.topic

    def broken(*_args):
        raise RuntimeError("the artifact API is down")

    monkeypatch.setattr(flows.topic, "_report_artifact", broken)
    state = _topic(ANSWERED, corpus, db_path)
    assert state.is_completed(), state.message
    assert _run_row(db_path, state) == ("succeeded", True)
    assert _topic_row(db_path) == ("succeeded", "")


@pytest.mark.parametrize("where, step", [("_what_changed", "compare"), ("judge", "topic")])
def test_an_unexpected_error_fails_the_topic_and_finishes_its_run(where, step, corpus, db_path,
                                                                   monkeypatch):
    """Comparing editions is a step; an error outside any step fails the topic as one would."""
    import flows.topic

    def broken(*_args):
        raise KeyError("a bug")

    monkeypatch.setattr(flows.topic, where, broken)
    state = _topic(ANSWERED, corpus, db_path)
    assert state.is_failed()
    assert _run_row(db_path, state) == ("failed", True)
    status, error = _topic_row(db_path)
    assert status == "failed" and error.startswith(f"{step}: KeyError")


def test_a_row_that_raises_does_not_end_the_batch_before_its_table(corpus, db_path, tmp_path,
                                                                   monkeypatch):
    import flows.batch
    from tests.flows.prefect_api import artifacts

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug after the topic ran")

    monkeypatch.setattr(flows.batch, "_changed", broken)  # read by each row after its topic
    csv = tmp_path / "topics.csv"
    csv.write_text(f"topic,max_subquestions,max_rounds\n{ANSWERED},2,1\n"
                   "Compare threading and asyncio for I/O-bound work,2,1\n", encoding="utf-8")
    state = flows.batch.research_batch(csv_path=str(csv), batch_id="b", model="offline",
                                       search="corpus", corpus_dir=str(corpus),
                                       db_path=str(db_path), max_concurrency=2,
                                       return_state=True)
    assert state.is_failed() and "2 of 2 rows" in state.message
    assert _run_row(db_path, state) == ("failed", True)
    table = next(a for a in artifacts(state.state_details.flow_run_id) if a.type == "table")
    assert table.key == "batch-b"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _logged(run) -> tuple[object, list[logging.LogRecord]]:
    from prefect.logging.configuration import ensure_logging_setup

    ensure_logging_setup()  # Prefect's first set-up would drop a handler added before it
    records = _Records()
    prefect = logging.getLogger("prefect")
    prefect.addHandler(records)
    try:
        return run(), records.records
    finally:
        prefect.removeHandler(records)


def test_no_evidence_is_one_line_without_a_traceback(corpus, db_path):
    state, records = _logged(lambda: _topic(NO_PAGE, corpus, db_path))
    assert state.is_failed() and "NoEvidence" in state.message
    assert not [r for r in records if r.exc_info]
    said = [r.getMessage() for r in records if "NoEvidence" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("Finished in state Failed("), said
    assert _run_row(db_path, state) == ("failed", True)


def test_a_batchs_failed_row_is_one_line_a_run_without_a_traceback(corpus, db_path, tmp_path):
    """The topic's flow run, the row's task run and the batch's flow run each end Failed
    saying why in one line."""
    from flows.batch import research_batch

    csv = tmp_path / "topics.csv"
    csv.write_text(f"topic\n{NO_PAGE}\n", encoding="utf-8")
    state, records = _logged(lambda: research_batch(
        csv_path=str(csv), batch_id="b", model="offline", search="corpus",
        corpus_dir=str(corpus), db_path=str(db_path), return_state=True))
    assert state.is_failed() and "NoEvidence" in state.message
    assert not [r for r in records if r.exc_info]
    said = [r.getMessage() for r in records if "NoEvidence" in r.getMessage()]
    assert len(said) == 3 and all(m.startswith("Finished in state Failed(") for m in said), said


def test_a_served_runs_expected_failure_is_one_line_too(corpus, db_path, prefect_server):
    """As a worker or `researchflow serve` runs a flow run: Prefect raises the Failed state's
    exception again on its way out, and used to log it whole."""
    from prefect.client.orchestration import get_client

    from flows.topic import research_topic

    with get_client(sync_client=True) as client:
        run = client.create_flow_run(research_topic, parameters=dict(
            topic=NO_PAGE, model="offline", search="corpus", corpus_dir=str(corpus),
            db_path=str(db_path)))
        done = subprocess.run(
            [sys.executable, "-m", "prefect.flow_engine", f"{ROOT}/flows/topic.py:research_topic"],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
            env={**os.environ, "PREFECT_API_URL": prefect_server,
                 "PREFECT__FLOW_RUN_ID": str(run.id), "PREFECT_LOGGING_LEVEL": "INFO",
                 "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "INFO"})  # the CLI's may linger
        assert client.read_flow_run(run.id).state.type.value == "FAILED"
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    assert said.count("NoEvidence") == 1, said


@pytest.mark.parametrize("command", ["run", "batch"])
def test_the_cli_names_the_run_its_page_and_the_retry_command(command, corpus, db_path,
                                                              tmp_path):
    import re

    from typer.testing import CliRunner

    from flows.cli import app

    target = [NO_PAGE]
    if command == "batch":
        target = [str(tmp_path / "topics.csv")]
        Path(target[0]).write_text(f"topic\n{NO_PAGE}\n", encoding="utf-8")
    result = CliRunner().invoke(app, [command, *target, "--model", "offline", "--search",
                                      "corpus", "--corpus", str(corpus), "--db", str(db_path)])
    assert result.exit_code == 1, result.output
    found = re.search(r"flow run ([0-9a-f-]{36}): (\S+)", result.output)
    assert found, result.output
    run_id, url = found.groups()
    assert url.endswith(f"/runs/flow-run/{run_id}")
    assert f"researchflow retry {run_id}" in result.output
    assert "Traceback" not in result.output
