"""`--fallback` is a flow parameter, not an environment variable the CLI sets: a retry of the
run (or a deployment's run of it) keeps the policy it started with, and so its cache keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.store import query_readonly
from tests.fakes.fix_scenario import _cached_task_runs
from tests.fakes.rerun_scenario import ROOT

TOPIC = "How do pelicans migrate across the ocean?"  # no page of the corpus is about it


def test_a_retry_of_a_run_started_with_fallback_none_keeps_it(corpus: Path, db_path: Path,
                                                              prefect_server: str, monkeypatch):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.topic import research_topic

    monkeypatch.delenv("RESEARCHFLOW_FALLBACK", raising=False)
    with temporary_settings(updates={PREFECT_API_URL: prefect_server}):
        first = research_topic(topic=TOPIC, model="offline", search="corpus",
                               corpus_dir=str(corpus), db_path=str(db_path), fallback="none",
                               return_state=True)
    assert first.is_failed(), first.message
    run_id = str(first.state_details.flow_run_id)

    # The retrying process's environment says otherwise; the run's parameter wins.
    done = subprocess.run([str(Path(sys.executable).parent / "researchflow"), "retry", run_id],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PREFECT_API_URL": prefect_server,
                               "RESEARCHFLOW_FALLBACK": "extractive"})
    assert done.returncode == 1, done.stdout + done.stderr  # still no page about pelicans

    _, rows = query_readonly(db_path, "SELECT settings_json FROM runs WHERE run_id = ?",
                             [run_id])
    assert json.loads(rows[0][0])["fallback"] == "none"
    with temporary_settings(updates={PREFECT_API_URL: prefect_server}):
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(run_id)
        cached = _cached_task_runs(run_id)
    assert run.parameters["fallback"] == "none" and run.run_count == 2
    assert cached > 0  # the same config, the same keys: the plan is served from the cache
