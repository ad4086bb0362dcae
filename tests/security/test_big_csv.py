"""A big CSV neither starves its good topics nor runs unbounded (issue 35, item 7): one good
topic plus 100,000 duplicate rows recorded its invalid rows at about 70 rows/s, one write each,
before any topic started; after 300 s the good topic had not."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.store import ResultStore, query_readonly
from core.store.connection import release_all
from tests.security.conftest import cli, researchflow

CORPUS = {"asyncio.md": "# Asyncio\n\nAsyncio cancels a task by raising CancelledError inside "
                        "the coroutine. A task cancelled while it waits stops at its next "
                        "await. Cancellation in asyncio is cooperative.\n"}
GOOD = "How does asyncio cancel a task?"


def _csv(path: Path, duplicates: int) -> Path:
    path.write_text("topic\n" + f"{GOOD}\n" * (duplicates + 1), encoding="utf-8")
    return path


def test_a_csv_past_the_row_cap_is_refused_before_prefect_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("RESEARCHFLOW_MAX_CSV_ROWS", "3")
    began = time.monotonic()
    result = cli("batch", str(_csv(tmp_path / "topics.csv", 3)), "--db",
                 str(tmp_path / "store.duckdb"), "--model", "offline")
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "4 rows, more than the 3" in lines[0], result.output
    assert time.monotonic() - began < 10
    assert not (tmp_path / "store.duckdb").exists()


def test_bad_rows_are_recorded_in_bulk(tmp_path):
    store = ResultStore(tmp_path / "store.duckdb")
    rows = [(f"t{i}", GOOD, "duplicate of row 2") for i in range(50_000)]
    began = time.monotonic()
    store.record_invalid_many("b", rows, "run-1")
    assert time.monotonic() - began < 30  # one write each: about 12 minutes at 70 rows/s
    release_all()
    assert query_readonly(tmp_path / "store.duckdb",
                          "SELECT count(*) FROM topics WHERE status = 'invalid'")[1] == [(50_000,)]


@pytest.mark.usefixtures("prefect_harness")
def test_the_good_topic_of_a_csv_of_duplicates_runs_at_once(tmp_path):
    from prefect.settings import PREFECT_API_URL

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, text in CORPUS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    db = tmp_path / "store.duckdb"
    began = time.monotonic()
    done = researchflow("batch", str(_csv(tmp_path / "topics.csv", 20_000)), "--max-rounds",
                        "1", "--corpus", str(corpus), "--db", str(db), "--model", "offline",
                        env={"PREFECT_API_URL": str(PREFECT_API_URL.value()),
                             "RESEARCHFLOW_MAX_CSV_ROWS": "100000"}, timeout=240)
    took = time.monotonic() - began
    _, rows = query_readonly(db, "SELECT status, count(*) FROM topics GROUP BY 1 ORDER BY 1")
    assert rows == [("invalid", 20_000), ("succeeded", 1)], (rows, done.stderr[-2000:])
    assert took < 50, took  # one write per bad row first: 81 s here (17 s in bulk)
    said = [line for line in done.stderr.splitlines() if "recorded as invalid" in line]
    assert len(said) <= 21, len(said)
