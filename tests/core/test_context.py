"""core.context and tasks.contexts: a run's context is built once per RunConfig, in one order,
from nothing but its config; the process keeps one per config, built once even when two threads
ask for a cold one; close() writes what its ledger and memo still hold before it lets go."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import duckdb

from core.accounting.usage import CallRecord
from core.context import RunContext, build
from core.settings import Settings, run_config
from core.store.connection import live_path, release_all
from core.store.query import query_readonly
from tasks.contexts import Contexts


def config(tmp_path: Path, **changes):
    """Each test its own store; the test process's cache (tests/conftest.py), so the bundled
    corpus is materialized and indexed once, not once per test."""
    fields = dict(model="offline", search="corpus", cache_dir=os.environ["RESEARCHFLOW_CACHE_DIR"],
                  db_path=tmp_path / "s.duckdb")
    return run_config(Settings(_env_file=None, **(fields | changes)))


def record(cost: float) -> CallRecord:
    return CallRecord(call_id=uuid.uuid4().hex, run_id="run-1", batch_id="b", topic_id="t",
                      subquestion_index=None, role="plan", provider="openai", model="gpt-4o",
                      cost_usd=cost)


def test_each_part_is_built_from_the_ones_before_it(tmp_path) -> None:
    context = build(config(tmp_path))
    try:
        assert context.ledger.sink is context.store  # the ledger writes to the run's store
        assert context.memo.sink.backend.path == context.store.path
        assert context.search.search("threads", 1)  # the bundled corpus
        assert context.search.index_path.is_relative_to(
            Path(os.environ["RESEARCHFLOW_CACHE_DIR"]).resolve())
        # The extractive engine's outline is drawn from that same corpus.
        assert context.engine.for_role("plan").plan(_topic("How do threads share memory?"))
        assert context.fallback is None  # no model: nothing to fall back from
    finally:
        context.close()


def test_one_context_per_config_and_each_config_its_own(tmp_path) -> None:
    contexts = Contexts()
    cfg = config(tmp_path)
    try:
        first = contexts.context_for(cfg)
        assert contexts.context_for(config(tmp_path)) is first  # an equal config
        other = contexts.context_for(config(tmp_path, results_per_query=7))
        assert other is not first and other.ledger is not first.ledger
    finally:
        contexts.close()
    assert contexts.context_for(cfg) is not first  # closed and forgotten: built anew
    contexts.close()


def test_two_threads_asking_for_a_cold_config_build_it_once(tmp_path, monkeypatch) -> None:
    """Before: the runtime built outside its lock, so sub-questions starting together each built
    an engine (a window probe, httpx clients) and all but one were dropped unclosed."""
    built: list[object] = []
    started = threading.Barrier(3)

    def slow_build(config, *, losable: bool = False) -> RunContext:
        built.append(config)
        time.sleep(0.3)  # long enough for the other thread to arrive while it builds
        return build(config, losable=losable)

    monkeypatch.setattr("tasks.contexts.build", slow_build)
    contexts = Contexts()
    cfg, other = config(tmp_path), config(tmp_path, results_per_query=7)
    got: dict[str, RunContext] = {}

    def ask(name: str, which) -> None:
        started.wait()
        got[name] = contexts.context_for(which)

    threads = [threading.Thread(target=ask, args=("a", cfg)),
               threading.Thread(target=ask, args=("b", cfg)),
               threading.Thread(target=ask, args=("c", other))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert got["a"] is got["b"]
        assert built.count(cfg) == 1  # one build for the cold config, however many asked
        assert got["c"] is not got["a"] and built.count(other) == 1  # not held up by the other
    finally:
        contexts.close()


def test_every_context_has_its_own_gates_at_its_own_cap(tmp_path) -> None:
    """Before: one gate per provider per process, whose per-minute cap the last caller set."""
    slow = build(config(tmp_path, search="searxng", searxng_url="http://127.0.0.1:9",
                        max_calls_per_minute=10))
    fast = build(config(tmp_path, search="searxng", searxng_url="http://127.0.0.1:9",
                        max_calls_per_minute=20))
    try:
        assert slow.gates["searxng"].calls_per_minute == 10
        assert fast.gates["searxng"].calls_per_minute == 20
        slow.gates["searxng"].rate_limited(3.0)
        assert fast.gates["searxng"].wait() == 0.0  # one run's pause is its own
    finally:
        slow.close()
        fast.close()


def test_close_writes_what_the_ledger_still_holds(tmp_path) -> None:
    """Before: reset() dropped the ledgers, and their batched records were lost at exit."""
    contexts = Contexts()
    cfg = config(tmp_path)
    contexts.context_for(cfg).ledger.record(record(0.25))  # waits for its batch
    contexts.close()
    with duckdb.connect(cfg.db_path, read_only=True) as con:
        assert con.execute("SELECT sum(cost_usd) FROM ledger").fetchone()[0] == 0.25


def test_usage_of_an_unreadable_store_says_so(tmp_path) -> None:
    cfg = config(tmp_path)
    context = build(cfg)
    release_all()
    os.remove(cfg.db_path)
    os.remove(live_path(Path(cfg.db_path)))
    os.mkdir(cfg.db_path)  # the store's files are gone: a folder stands where it was
    try:
        assert context.usage("run-1").line().startswith("usage: unavailable (")
    finally:
        context.close()


def test_a_fresh_context_estimates_tokens_as_a_fresh_process_does(tmp_path) -> None:
    """What one context's calls calibrated does not move the next one's page cuts: a rerun
    after a fresh start (a test worker's next test, a long-lived process) cuts a page into the
    same pieces as a rerun in a new process, so its repeated calls are served from the memo."""
    first = build(config(tmp_path))
    before = first.estimator.estimate("x" * 4000, model="gpt-4o-mini")
    first.estimator.calibrate("x" * 4000, 2000, model="gpt-4o-mini")
    assert first.estimator.estimate("x" * 4000, model="gpt-4o-mini") != before
    first.close()
    again = build(config(tmp_path))
    assert again.estimator.estimate("x" * 4000, model="gpt-4o-mini") == before
    again.close()


def test_a_losable_process_writes_what_its_memos_hold_before_each_call(tmp_path) -> None:
    """Only a process that may be lost mid-run (a Dask worker) pays a memo write per call."""
    contexts = Contexts()
    try:
        before = contexts.context_for(config(tmp_path)).memo
        assert not before.write_first
        contexts.losable()
        after = contexts.context_for(config(tmp_path, memo_ttl_hours=1)).memo
        assert before.write_first and after.write_first and after is not before
    finally:
        contexts.close()


def _topic(text: str):
    from core.models import Topic, TopicOptions

    return Topic.of(text, TopicOptions(), "adhoc", "")


EXIT = """
import sys
from pathlib import Path
from core.settings import Settings, run_config
from core.accounting.usage import CallRecord
from tasks.contexts import context_for

tmp = Path(sys.argv[1])
cfg = run_config(Settings(_env_file=None, model="offline", search="corpus", corpus_dir=tmp / "c",
                          cache_dir=tmp / "cache", db_path=tmp / "s.duckdb"))
corpus = context_for(cfg).search
assert corpus.search("threads", 2)
context_for(cfg).ledger.record(CallRecord(
    call_id="c1", run_id="run-1", batch_id="b", topic_id="t", subquestion_index=None,
    role="plan", provider="openai", model="gpt-4o", cost_usd=0.5))
checks.append(lambda: print("index open" if corpus._conn is not None else "index closed"))
"""


def test_at_exit_the_contexts_write_their_batches_and_close_their_files(tmp_path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("# Threads\n\nThreads share memory in a process.\n")
    root = Path(__file__).resolve().parents[2]
    # atexit runs hooks last-registered first: the check is registered before tasks.contexts is
    # imported, so it runs after the contexts' hook.
    code = "import atexit\nchecks = []\natexit.register(lambda: [c() for c in checks])\n" + EXIT
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("index closed"), done.stdout + done.stderr
    _, rows = query_readonly(tmp_path / "s.duckdb", "SELECT cost_usd FROM ledger")
    assert rows == [(0.5,)]  # the ledger's batch was written on the way out
