"""A tampered cached result is refused and computed again, never executed.

Prefect loads a persisted result with whatever serializer its file names, so anyone who can write
to the results folder (PREFECT_HOME/storage, or a PREFECT_RESULTS_LOCAL_STORAGE_PATH shared
between machines) chose how it was loaded: a cloudpickle payload ran its code on the next rerun,
and Prefect's "json" serializer takes its JSON library by dotted name from the file. Here a real
flow runs, every file it left in the results folder is rewritten the way an attacker would, the
flow runs again, and the payloads' marker file must not exist while the run still completes, by
computing again.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
from pathlib import Path

import pytest

from core.models import TopicOptions
from tasks import contexts

TOPIC = "How do threads share memory? (tampered results)"


class Payload:
    """Unpickled, it creates the marker file (a stand-in for any code)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def _pickle_attack(path: Path, marker: Path) -> None:
    evil = base64.encodebytes(pickle.dumps(Payload(marker))).decode()
    try:
        record = json.loads(path.read_bytes())
    except ValueError:
        record = None
    if isinstance(record, dict) and "metadata" in record:  # a whole record (Prefect's default)
        record["metadata"]["serializer"] = {"type": "pickle", "picklelib": "cloudpickle"}
        record["result"] = evil
        path.write_text(json.dumps(record))
    elif isinstance(record, dict) and "serializer" in record:  # metadata kept apart
        record["serializer"] = {"type": "pickle", "picklelib": "cloudpickle"}
        path.write_text(json.dumps(record))
    else:  # a payload: replace it with a pickle a pickle serializer would load
        path.write_text(evil)


def _json_attack(path: Path, marker: Path) -> None:
    # Prefect's own "json" serializer, configured by the file: its jsonlib is any callable.
    code = f"open({str(marker)!r}, 'w').close()"
    serializer = {"type": "json", "jsonlib": "builtins.exec", "object_decoder": None,
                  "object_encoder": None, "dumps_kwargs": {}, "loads_kwargs": {}}
    try:
        record = json.loads(path.read_bytes())
    except ValueError:
        record = None
    if isinstance(record, dict) and "metadata" in record:
        record["metadata"]["serializer"] = serializer
        record["result"] = code
        path.write_text(json.dumps(record))
    elif isinstance(record, dict) and "serializer" in record:
        record["serializer"] = serializer
        path.write_text(json.dumps(record))
    else:
        path.write_text(code)


def _files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def _cached_task_runs(flow_run_id) -> int:
    # States reach the API as events recorded in batches: read them once they have settled,
    # or a fast run counts task runs still shown Pending (CI once read 0 cached this way).
    from tests.flows.prefect_api import task_runs

    return sum(1 for r in task_runs(flow_run_id) if r.state and r.state.name == "Cached")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_tampered_results_are_computed_again_never_executed(tmp_path, monkeypatch):
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    from flows.topic import research_topic

    results = tmp_path / "results"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"t{i}.md").write_text(f"# Threads {i}\n\nThreads share memory inside one "
                                         f"process; a lock protects shared data ({i}).\n")
    marker = tmp_path / "PAYLOAD-RAN"

    def run():
        contexts.close()
        state = research_topic(topic=TOPIC, batch_id="tamper", model="offline", search="corpus",
                               corpus_dir=str(corpus), db_path=str(tmp_path / "s.duckdb"),
                               return_state=True,
                               options=TopicOptions(max_subquestions=2, max_rounds=1))
        assert not marker.exists(), "a cached result ran its payload"
        assert state.is_completed(), state.message
        return state.state_details.flow_run_id

    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(results)}):
        first = run()
        written = _files(results)
        assert written
        for attack in (_pickle_attack, _json_attack):
            for path in _files(results):
                attack(path, marker)
            again = run()
            assert _cached_task_runs(again) == 0  # every tampered result was computed again
        reused = run()
        assert _cached_task_runs(reused) > 0  # the recomputed results are good cache again
    assert _cached_task_runs(first) == 0
