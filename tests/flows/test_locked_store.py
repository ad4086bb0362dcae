"""Failures are always recorded: a store that another process holds while a batch records a
topic's failure is waited for (bounded), and the batch's table artifact appears even when the
wait runs out."""

from __future__ import annotations

import json

import subprocess
import sys
from pathlib import Path

import pytest

from core.store import query_readonly
from core.store.connection import live_path
from tests.fakes.http import ScriptedServer
from tests.fakes.rerun_scenario import RefusingProvider, RerunScenario
from tests.fakes.research_provider import SDK_ENV
from tests.flows.prefect_api import artifacts

pytestmark = pytest.mark.slow

HOLD = """
import sys, time, duckdb
while True:  # the batch may hold the file for a moment: take it as soon as it lets go
    try:
        con = duckdb.connect(sys.argv[1])
        break
    except duckdb.IOException:
        time.sleep(0.01)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


class Locker:
    """Another process (a DuckDB shell, say) that holds the store for `seconds`, once."""

    def __init__(self, db: Path, seconds: float) -> None:
        self.db, self.seconds = db, seconds
        self.process: subprocess.Popen | None = None

    def __call__(self) -> None:
        if self.process is None:
            self.process = subprocess.Popen([sys.executable, "-c", HOLD, str(live_path(self.db)),
                                             str(self.seconds)], stdout=subprocess.PIPE,
                                            text=True)
            assert self.process.stdout.readline().strip() == "locked"

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def _run_batch(tmp_path: Path, monkeypatch, seconds: float):
    from flows.batch import research_batch

    scenario = RerunScenario(tmp_path)
    locker = Locker(scenario.db, seconds)
    scenario.provider = RefusingProvider("report", on_refuse=locker)
    key_var, url_var, suffix = SDK_ENV["openai"]
    try:
        with ScriptedServer(default=scenario.provider) as server:
            monkeypatch.setenv(key_var, "sk-test-not-a-real-key")
            monkeypatch.setenv(url_var, server.url + suffix)
            state = research_batch(**scenario.parameters(), return_state=True)
    finally:
        locker.stop()
    return scenario, state


def test_a_failure_is_recorded_after_waiting_for_a_locked_store(tmp_path, monkeypatch,
                                                                prefect_harness):
    monkeypatch.setenv("RESEARCHFLOW_STORE_LOCK_TIMEOUT", "30")
    scenario, state = _run_batch(tmp_path, monkeypatch, seconds=4)
    assert state.is_failed()
    _, rows = query_readonly(scenario.db, "SELECT topic, status, error FROM topics ORDER BY topic")
    by_topic = {topic: (status, error) for topic, status, error in rows}
    second = next(t for t in by_topic if "second topic" in t)
    assert by_topic[second][0] == "failed" and "safety system" in by_topic[second][1]
    assert [s for s, _ in by_topic.values()].count("succeeded") == 1
    _, runs = query_readonly(scenario.db, "SELECT status FROM runs")
    assert runs == [("failed",)]
    kinds = {a.type for a in artifacts(state.state_details.flow_run_id)}
    assert "table" in kinds


def test_the_batch_table_appears_when_the_store_stays_locked(tmp_path, monkeypatch,
                                                            prefect_harness):
    monkeypatch.setenv("RESEARCHFLOW_STORE_LOCK_TIMEOUT", "1")
    scenario, state = _run_batch(tmp_path, monkeypatch, seconds=8)
    assert state.is_failed()
    table = next(a for a in artifacts(state.state_details.flow_run_id) if a.type == "table")
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    # The table clips a topic to what the UI shows: the second topic's row, failed.
    assert any(r["status"] == "failed" and r["topic"].startswith("Threading or asyncio for bl")
               for r in rows), rows
