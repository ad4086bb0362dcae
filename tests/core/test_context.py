"""core.runtime: one object per process builds and holds what RunConfigs name, under one key
shape, and its close() writes what its ledgers still hold before it lets go."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import duckdb

from core import runtime
from core.settings import Settings, run_config
from core.store.connection import release_all
from core.store.query import query_readonly
from core.accounting.usage import CallRecord


def config(tmp_path: Path, **changes):
    return run_config(Settings(_env_file=None, model="offline", search="corpus",
                               cache_dir=tmp_path / "cache", db_path=tmp_path / "s.duckdb",
                               **changes))


def record(cost: float) -> CallRecord:
    return CallRecord(call_id=uuid.uuid4().hex, run_id="run-1", batch_id="b", topic_id="t",
                      subquestion_index=None, role="plan", provider="openai", model="gpt-4o",
                      cost_usd=cost)


def test_one_object_per_key_and_a_fresh_runtime_builds_anew(tmp_path) -> None:
    rt = runtime.Runtime()
    cfg = config(tmp_path)
    assert rt.store(cfg.db_path) is rt.store(str(Path(cfg.db_path)))
    assert rt.ledger(cfg.db_path) is rt.ledger(cfg.db_path)
    assert rt.limits(cfg) is rt.limits(cfg.model_copy(update={"model": "openai:gpt-4o"}))
    assert rt.gate("openai") is rt.gate("openai") and rt.gate("openai") is not rt.gate("serpapi")
    assert rt.engine(cfg) is rt.engine(cfg)
    assert rt.estimator() is rt.estimator()
    other = runtime.Runtime()
    assert other.ledger(cfg.db_path) is not rt.ledger(cfg.db_path)
    rt.close()
    other.close()


def test_the_gate_follows_the_latest_per_minute_cap(tmp_path) -> None:
    rt = runtime.Runtime()
    assert rt.gate("openai", 10).calls_per_minute == 10
    assert rt.gate("openai", 20).calls_per_minute == 20


def test_reset_flushes_what_ledgers_still_hold(tmp_path) -> None:
    """Before: reset() dropped the ledgers, and their batched records were lost at exit."""
    rt = runtime.reset()
    cfg = config(tmp_path)
    ledger = rt.ledger(cfg.db_path)
    ledger.batch_seconds = 3600  # nothing would be written for an hour
    ledger.record(record(0.25))
    runtime.reset()
    release_all()
    with duckdb.connect(cfg.db_path, read_only=True) as con:
        assert con.execute("SELECT sum(cost_usd) FROM llm_calls").fetchone()[0] == 0.25


def test_usage_of_an_unreadable_store_says_so(tmp_path) -> None:
    rt = runtime.Runtime()
    folder = tmp_path / "not-a-store"
    folder.mkdir()
    line = rt.usage(folder, "run-1").line()
    assert line.startswith("usage: unavailable (")


def test_a_fresh_runtime_estimates_tokens_as_a_fresh_process_does() -> None:
    """What one runtime's calls calibrated does not move the next one's page cuts: a rerun
    after `reset()` (a test worker's next test, a long-lived process) cuts a page into the same
    pieces as a rerun in a new process, so its repeated calls are served from the memo."""
    first = runtime.Runtime()
    before = first.estimator().estimate("x" * 4000, model="gpt-4o-mini")
    first.estimator().calibrate("x" * 4000, 2000, model="gpt-4o-mini")
    assert first.estimator().estimate("x" * 4000, model="gpt-4o-mini") != before
    first.close()
    assert runtime.Runtime().estimator().estimate("x" * 4000, model="gpt-4o-mini") == before


def test_a_losable_process_writes_what_its_memos_hold_before_each_call(tmp_path) -> None:
    """Only a process that may be lost mid-run (a Dask worker) pays a memo write per call."""
    rt = runtime.Runtime()
    before = rt.memo(config(tmp_path))
    assert not before.write_first
    rt.losable()
    after = rt.memo(config(tmp_path, memo_ttl_hours=1))
    assert before.write_first and after.write_first and after is not before
    rt.close()


EXIT = """
import sys
from pathlib import Path
from core import runtime
from core.settings import Settings, run_config
from core.accounting.usage import CallRecord

tmp = Path(sys.argv[1])
cfg = run_config(Settings(_env_file=None, model="offline", search="corpus", corpus_dir=tmp / "c",
                          cache_dir=tmp / "cache", db_path=tmp / "s.duckdb"))
corpus = runtime.current().search(cfg)
assert corpus.search("threads", 2)
runtime.current().ledger(cfg.db_path).record(CallRecord(
    call_id="c1", run_id="run-1", batch_id="b", topic_id="t", subquestion_index=None,
    role="plan", provider="openai", model="gpt-4o", cost_usd=0.5))
checks.append(lambda: print("index open" if corpus._conn is not None else "index closed"))
"""


def test_at_exit_the_runtime_writes_its_batches_and_closes_its_files(tmp_path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("# Threads\n\nThreads share memory in a process.\n")
    root = Path(__file__).resolve().parents[2]
    # atexit runs hooks last-registered first: the check is registered before core.runtime is
    # imported, so it runs after the runtime's hook.
    code = "import atexit\nchecks = []\natexit.register(lambda: [c() for c in checks])\n" + EXIT
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("index closed"), done.stdout + done.stderr
    _, rows = query_readonly(tmp_path / "s.duckdb", "SELECT cost_usd FROM llm_calls")
    assert rows == [(0.5,)]  # the ledger's batch was written on the way out
