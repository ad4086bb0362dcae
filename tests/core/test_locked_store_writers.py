"""Issue 33, item 6: a store that another process keeps locked for minutes loses no usage row and
no memo answer.

Another process (a DuckDB shell left open, say) holds the real DuckDB file for LOCK_SECONDS
while producer threads record usage rows through the real ledger and memo answers through the
real call memo, into a real ResultStore and MemoStore. The writers' pauses and bounds are
shortened (`Patience`), so the test sees many refusals, the backlog marks, and producers held
by a full queue; the lock itself lasts minutes, as in the issue. When the other process lets
go, every row reaches the file, and the log said what happened with counts only.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from core.accounting.batches import Patience
from core.accounting.ledger import Ledger
from core.accounting.memo import MEMO_PATIENCE, CallMemo
from core.accounting.usage import CallRecord
from core.store import ResultStore
from core.store.call_memo import MemoStore
from core.store.connection import live_path, release_all

pytestmark = pytest.mark.slow

LOCK_SECONDS = 150.0
MAX_WAITING = 300  # usage rows; the producers reach it well inside the lock
MARKS = (50, 200)
SECRET = "answer text that must never reach a log line"
ANSWER = json.dumps({"text": SECRET})  # the memo's table keeps answers as JSON

HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])  # read-write: DuckDB locks the file for this process
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def _record(n: int) -> CallRecord:
    return CallRecord(call_id=f"call-{n:05d}-{uuid.uuid4().hex[:6]}", run_id="run-locked",
                      batch_id="b", topic_id="t", subquestion_index=None, role="condense",
                      provider="openai", model="gpt-4o-mini", cost_usd=0.001)


def test_a_store_locked_for_minutes_loses_no_usage_row_or_memo_answer(tmp_path: Path,
                                                                      caplog) -> None:
    caplog.set_level(logging.INFO, logger="researchflow.batches")
    db = tmp_path / "store.duckdb"
    store = ResultStore(db, lock_timeout=0.2, hold_seconds=0)  # the schema, before the lock
    memo_store = MemoStore(db, lock_timeout=0.2, hold_seconds=0, retry_after=1.0)
    release_all()
    patience = Patience(first_retry=0.5, max_retry=8.0, max_waiting=MAX_WAITING,
                        backlog_marks=MARKS, at_close=60.0)
    ledger = Ledger(store, batch_seconds=0.2, patience=patience)
    memo = CallMemo(memo_store, ttl_hours=24, batch_seconds=0.2, patience=replace(
        MEMO_PATIENCE, first_retry=0.5, max_retry=8.0, backlog_marks=MARKS))

    ledger.spent("run-locked", "t")  # seeded as in a running process: records read nothing
    ledger.spent("run-locked")

    locker = subprocess.Popen([sys.executable, "-c", HOLD, str(live_path(db)), str(LOCK_SECONDS)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        locked_at = time.monotonic()
        recorded: list[str] = []
        kept: list[str] = []
        held_most = 0  # the most usage rows seen waiting while the file was locked
        stop = threading.Event()
        guard = threading.Lock()

        def produce(worker: int) -> None:
            n = 0
            while not stop.is_set():
                record = _record(worker * 100_000 + n)
                ledger.record(record)  # may wait here: the queue is full
                key = memo.key("llm", {"worker": worker, "n": n})
                memo.keep(key, ANSWER, kind="llm", provider="openai", model="gpt-4o-mini",
                          role="condense")
                with guard:
                    recorded.append(record.call_id)
                    kept.append(key.key)
                n += 1
                time.sleep(0.1)

        producers = [threading.Thread(target=produce, args=(w,), daemon=True) for w in range(2)]
        for producer in producers:
            producer.start()
        while locker.poll() is None:  # the other process holds the file all this while
            held_most = max(held_most, len(ledger._records.waiting()))  # noqa: SLF001
            time.sleep(0.5)
        held_for = time.monotonic() - locked_at
        time.sleep(2.0)  # the writers' next tries find the file free, producers go on
        stop.set()
        for producer in producers:
            producer.join(timeout=60)
            assert not producer.is_alive()
    finally:
        locker.kill()
        locker.wait()

    assert ledger._records.close() is True  # noqa: SLF001 - closed as at exit: nothing left
    memo.close()
    release_all()

    assert locker.returncode == 0 and held_for >= LOCK_SECONDS - 1
    with duckdb.connect(str(db), read_only=True) as con:
        stored_calls = {r[0] for r in con.execute("SELECT call_id FROM ledger").fetchall()}
        stored_answers = dict(con.execute("SELECT fingerprint, answer FROM call_memo").fetchall())
    assert len(recorded) > MAX_WAITING  # more rows than fit in the queue passed through it
    assert stored_calls == set(recorded), f"{len(set(recorded) - stored_calls)} usage rows lost"
    assert set(stored_answers) == set(kept)
    assert all(json.loads(answer) == {"text": SECRET} for answer in stored_answers.values())
    assert memo._rows.dropped == 0 and ledger._records.dropped == 0  # noqa: SLF001
    # Bounded: producers were held while the queue was full (one row each may be on its way).
    assert MAX_WAITING <= held_most <= MAX_WAITING + len(producers)

    log = caplog.text
    refusals = [r.getMessage() for r in caplog.records
                if "usage record(s) wait to be written" in r.getMessage()]
    assert len(refusals) >= 4  # said at the 1st, 2nd, 4th, 8th... refusal, not once
    assert "backlog: " in log and "(past 50)" in log and "(past 200)" in log
    assert "usage record(s) wait for the store, the most allowed" in log
    assert "backlog of usage record(s) drained" in log
    assert "backlog of memo answer(s) drained" in log
    assert SECRET not in log and recorded[0] not in log  # counts, never a row
