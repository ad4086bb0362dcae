"""The store on DuckLake: a real PostgreSQL catalog (started here), data files in a temp folder.

Two worker processes write results, ledger rows, learned limits and cached pages into the same
lake at once, sharing keys on purpose (one source, one model, one page): every row must be there
exactly once, and the readers must answer as they do on a file. Skipped only when no PostgreSQL
server binaries exist (.ci/run installs them).
"""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest

from core.models import Source, Topic
from core.settings import Settings, run_config
from core.store import PageRecord, PageStore, ReadOnlyQueryError, ResultStore, query_readonly
from core.store import lake
from core.store.connection import StoreError
from core.store.backend import lake_target
from core.store.call_memo import MemoStore
from core.accounting.usage import CallRecord
from tests.fakes.postgres import Postgres, pg_bin
from tests.core.test_store import SHARED, make_result

# One xdist worker runs the module: its PostgreSQL server is started once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("postgres")]

ROUNDS = 6  # per worker: a result, five ledger rows, a limit and a page each


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binaries (initdb); .ci/run installs postgresql")
    server = Postgres(bin_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def lake_store(postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
               ) -> tuple[str, str]:
    target, data = postgres.new_lake(tmp_path)
    monkeypatch.setenv("RESEARCHFLOW_LAKE_DATA_PATH", data)  # inherited by spawned workers
    return target, data


def _write_share(target: str, worker: int, start: Any, out: Any) -> None:
    """One worker process: ROUNDS of every kind of write, keys shared with the other worker."""
    start.wait(timeout=60)
    began = time.perf_counter()
    store = ResultStore(target)
    run_id = f"run-{worker}"
    store.start_run(run_id, "lake", "offline", "corpus", {"worker": worker})
    pages = PageStore(target)
    for i in range(ROUNDS):
        own = Source(url=f"https://example.org/w{worker}/{i}", title="own", text="own text")
        store.save_result(make_result(f"Worker {worker} topic {i}?", batch="lake",
                                      extra_source=own), run_id=run_id, engine="offline")
        topic_id = Topic(text=f"Worker {worker} topic {i}?", batch_id="lake").topic_id
        store.record_calls([CallRecord(
            call_id=uuid.uuid4().hex, run_id=run_id, batch_id="lake", topic_id=topic_id,
            subquestion_index=0, role="condense", provider="openai", model="gpt-x",
            input_tokens=10, output_tokens=2, cost_usd=0.001) for _ in range(5)])
        store.remember_limits("gpt-x", request_budget=1000 - 10 * i - worker)
        pages.put_page("https://example.org/shared", PageRecord(status="ok", text=f"{worker}"))
    store.finish_run(run_id, "succeeded")
    backend = lake.backend_for(target)
    out.put({"worker": worker, "pid": os.getpid(), "seconds": time.perf_counter() - began,
             "commits": backend.commits, "conflicts": backend.conflicts})


def test_two_processes_write_one_lake_at_once(lake_store: tuple[str, str]) -> None:
    target, _ = lake_store
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_write_share, args=(target, w, start, out)) for w in (0, 1)]
    for p in workers:
        p.start()
    time.sleep(2.0)  # both have imported everything; the lake does not exist yet
    began = time.perf_counter()
    start.set()
    reports = _collect(out, workers)
    elapsed = time.perf_counter() - began
    retried = sum(r["conflicts"] for r in reports)
    print(f"\ntwo writers, {ROUNDS} rounds each: {sum(r['commits'] for r in reports)} commits, "
          f"{retried} conflicts retried, {elapsed:.1f}s "
          + ", ".join(f"w{r['worker']} {r['seconds']:.1f}s/{r['conflicts']}" for r in reports))
    assert len({r["pid"] for r in reports} | {os.getpid()}) == 3

    store = ResultStore(target)
    counts = store.counts()
    assert counts["runs"] == 2 and counts["topics"] == counts["reports"] == 2 * ROUNDS
    assert counts["sources"] == 1 + 2 * ROUNDS  # the shared one once, each worker's own
    assert counts["topic_sources"] == 2 * 2 * ROUNDS
    assert counts["ledger"] == 2 * ROUNDS * 5
    assert counts["model_limits"] == 1 and counts["pages"] == 1
    assert store.learned_limits()["gpt-x"]["request_budget"] == 1000 - 10 * (ROUNDS - 1) - 1
    _assert_keys_unique(target)

    listed = store.list_reports("lake")
    assert len(listed) == 2 * ROUNDS and all(r["n_citations"] == 1 for r in listed)
    report = store.get_report(listed[0]["report_id"])
    assert report["citations"][0]["url"] == SHARED.url
    assert report["usage"].calls == 5 and report["usage"].cost_usd == pytest.approx(0.005)
    assert store.usage(batch_id="lake").calls == 2 * ROUNDS * 5
    assert store.usage(run_id="run-1").cost_usd == pytest.approx(ROUNDS * 5 * 0.001)
    _, rows = query_readonly(target, "SELECT status, count(*) FROM runs GROUP BY status")
    assert rows == [("succeeded", 2)]


def _collect(out: Any, workers: list[Any], timeout: float = 240) -> list[dict[str, Any]]:
    """Each worker's report; fails as soon as a worker dies without one."""
    import queue

    reports: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(reports) < len(workers):
        try:
            reports.append(out.get(timeout=0.5))
        except queue.Empty:
            dead = [p.exitcode for p in workers if p.exitcode not in (None, 0)]
            assert not dead, f"a worker died (exit codes {dead}); its traceback is above"
            assert time.monotonic() < deadline, "the workers did not finish in time"
    for p in workers:
        p.join(timeout=60)
        assert p.exitcode == 0
    return reports


def _assert_keys_unique(target: str) -> None:
    """Every primary key of the file schema holds in the lake, which has no constraints."""
    store = ResultStore(target)
    with store.backend.read() as con:
        for table, key in lake.lake_schema().keys.items():
            total, distinct = con.execute(
                f"SELECT count(*), count(DISTINCT ({', '.join(key)})) FROM {table}").fetchone()
            assert total == distinct, f"{table}: {total} rows, {distinct} keys"


def test_the_store_reads_and_writes_a_lake_like_a_file(lake_store: tuple[str, str]) -> None:
    target, _ = lake_store
    store = ResultStore(target)
    assert store.path is None and store.schema_version() == ResultStore(target).schema_version()
    first = store.save_result(make_result(), run_id="r", engine="offline")
    assert store.save_result(make_result(), run_id="r", engine="offline") == first
    before = store.counts()
    store.save_result(make_result(), run_id="r", engine="offline")
    assert store.counts() == before  # a rerun replaces its rows
    topic = Topic(text="Failing?", batch_id="b1")
    store.record_failure("b1", topic, "boom", "r")
    store.record_skipped("b1", topic, "over budget", "r")
    status = store.topic_status(topic.topic_id)
    assert (status["status"], status["error"]) == ("skipped", "over budget")
    assert store.unverified_citations(first) == []
    with pytest.raises(ReadOnlyQueryError):
        query_readonly(target, "DELETE FROM reports")
    _, views = query_readonly(target, "SELECT batch_id, calls, cost_usd FROM usage_by_batch")
    assert views == [("b1", 0, 0.0)]  # a batch shows whether or not it spent
    pages = PageStore(target)
    pages.put_page("u", PageRecord(status="refused", reason="404"))
    assert pages.get_page("u", 24).reason == "404"
    _assert_keys_unique(target)


def test_the_call_memo_keeps_and_serves_answers_in_a_lake(lake_store: tuple[str, str]) -> None:
    """The memo's upsert is rewritten into a MERGE on a lake: two workers recording the same
    call leave one row, the newest answer, which a third worker is served."""
    from datetime import datetime, timedelta, timezone

    from core.accounting.memo import CallMemo, MemoKey
    from core.store.call_memo import MemoRow

    target, _ = lake_store
    now = datetime.now(timezone.utc)
    for worker in ("a", "b"):
        assert MemoStore(target).keep([MemoRow("fp-shared", "llm", "openai", "gpt-x", "condense",
                                               f'"answer {worker}"', now)])
    assert MemoStore(target).keep([MemoRow(f"fp-{i}", "search", "serpapi", "serpapi", "search",
                                           "[]", now) for i in range(3)])
    since = now - timedelta(hours=1)
    assert MemoStore(target).fingerprints(since) == {"fp-shared", "fp-0", "fp-1", "fp-2"}
    assert MemoStore(target).answers(["fp-shared", "fp-none"], since) == {
        "fp-shared": '"answer b"'}
    memo = CallMemo(MemoStore(target), ttl_hours=1, batch_seconds=0)
    assert memo.answer(MemoKey("fp-shared")) == '"answer b"'
    assert memo.answer(MemoKey("fp-none")) is None
    _assert_keys_unique(target)


def test_columns_match_the_file_schema(lake_store: tuple[str, str], tmp_path: Path) -> None:
    target, _ = lake_store
    file_store, lake_store_ = ResultStore(tmp_path / "rf.duckdb"), ResultStore(target)

    def shape(store: ResultStore, database: str) -> dict[str, list[tuple[str, str]]]:
        with store.backend.read() as con:
            rows = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                               "WHERE database_name = ? AND table_name <> ? ORDER BY table_name, "
                               "column_index", [database, lake.GUARD]).fetchall()
        out: dict[str, list[tuple[str, str]]] = {}
        for table, column, type_ in rows:
            out.setdefault(table, []).append((column, type_))
        return out

    assert shape(lake_store_, lake.ALIAS) == shape(file_store, "rf")


def test_an_older_lake_gains_what_it_lacks_and_a_newer_one_is_refused(
        lake_store: tuple[str, str]) -> None:
    from core.store import SCHEMA_VERSION, StoreError

    target, _ = lake_store
    store = ResultStore(target)
    store.start_run("r-old", "b", "offline", "corpus", {})
    backend = lake.backend_for(target)

    def make_older(con: Any) -> None:  # as a lake of the previous version would be
        con.execute("ALTER TABLE runs DROP COLUMN pid")
        con.execute("DROP VIEW usage_by_batch")
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                    [str(SCHEMA_VERSION - 1)])

    backend.write(make_older)
    backend._ready = False  # as a process started after the upgrade would find it
    backend.ensure_schema()
    assert store.schema_version() == SCHEMA_VERSION
    _, rows = query_readonly(target, "SELECT run_id, pid FROM runs")
    assert rows == [("r-old", None)]  # the row kept, the column back
    assert query_readonly(target, "SELECT count(*) FROM usage_by_batch")[1] == [(0,)]

    backend.write(lambda con: con.execute(
        "UPDATE meta SET value = '999' WHERE key = 'schema_version'"))
    backend._ready = False
    with pytest.raises(StoreError, match="newer"):
        backend.ensure_schema()


def test_an_older_lakes_texts_become_the_versions_its_quotes_name(
        lake_store: tuple[str, str]) -> None:
    """A v12 lake gains the v13 columns by itself; what they hold for its rows (the version
    each stored text is) is filled in by migrations.LAKE_FILLS."""
    import json

    from core.store import SCHEMA_VERSION
    from core.store.source_versions import content_hash

    target, _ = lake_store
    store = ResultStore(target)
    report_id = store.save_result(make_result(), run_id="r", engine="offline")
    backend = lake.backend_for(target)

    def make_v12(con: Any) -> None:  # as the v12 code left it: no version named anywhere
        for table in ("sources", "topic_sources", "citations"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN content_hash")
        for topic_id, sub, claim, evidence in con.execute(
                "SELECT topic_id, subquestion_index, claim_index, evidence FROM findings "
                "WHERE claim_index >= 0").fetchall():
            items = [{k: v for k, v in e.items() if k != "content_hash"}
                     for e in json.loads(evidence)]
            con.execute("UPDATE findings SET evidence = ? WHERE topic_id = ? AND "
                        "subquestion_index = ? AND claim_index = ?",
                        [json.dumps(items), topic_id, sub, claim])
        con.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")

    backend.write(make_v12)
    backend._ready = False
    backend.ensure_schema()
    assert store.schema_version() == SCHEMA_VERSION
    version = content_hash(SHARED.text)
    for table in ("sources", "topic_sources", "citations"):
        assert query_readonly(target, f"SELECT DISTINCT content_hash FROM {table}")[1] == [
            (version,)], table
    _, evidence = query_readonly(target, "SELECT evidence FROM findings WHERE claim = "
                                         "'One writer process.'")
    assert json.loads(evidence[0][0])[0]["content_hash"] == version
    assert store.unverified_citations(report_id) == []
    _assert_keys_unique(target)


def test_settings_choose_the_lake(lake_store: tuple[str, str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target, _ = lake_store
    monkeypatch.setenv("RESEARCHFLOW_STORE", target)
    config = run_config(Settings.load())
    assert config.db_path == target
    # Only a target that starts with "ducklake:" is a lake; resolved into a path, it is a file.
    resolved = Path(config.db_path).expanduser().resolve()
    assert lake_target(resolved) is None and lake_target(config.db_path) == target
    monkeypatch.setenv("RESEARCHFLOW_STORE", target + " password=hunter2")
    with pytest.raises(Exception, match="PGPASSWORD"):
        ResultStore(Settings.load().store_target())


def test_the_readmes_role_creates_the_lake_and_a_role_without_create_is_told_why(
        postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's setup: a LOGIN role that owns its database (`createdb -O rf`). Without it,
    PostgreSQL 15 refuses the role CREATE in schema public, and the error says what to run."""
    role = f"rf_{uuid.uuid4().hex[:6]}"
    postgres.psql(f"CREATE ROLE {role} LOGIN")  # not a superuser, as in the README
    monkeypatch.setenv("RESEARCHFLOW_LAKE_DATA_PATH", f"{tmp_path}/")
    not_owned = postgres.target(postgres.new_database(), role)
    with pytest.raises(StoreError) as refused:
        ResultStore(not_owned).counts()
    message = str(refused.value)
    assert "permission denied for schema public" in message and "\n" not in message
    assert "createdb -O" in message and "GRANT CREATE ON SCHEMA public" in message

    owned = postgres.target(postgres.new_database(owner=role), role)
    store = ResultStore(owned)
    store.save_result(make_result("Owned by its role?", batch="readme"), run_id="r",
                      engine="offline")
    assert store.counts()["reports"] == 1


def test_an_older_lakes_ledger_moves_into_the_ledger_by_kind(
        lake_store: tuple[str, str]) -> None:
    """A v13 lake's table llm_calls (every kind of row) becomes the table ledger with each
    row's kind, and llm_calls a view of the LLM calls; its reports gain their evidence
    strength from their citations (LAKE_FILLS)."""
    from core.store import SCHEMA_VERSION
    from core.store.migrations import _V14_CALL_COLUMNS

    target, _ = lake_store
    store = ResultStore(target)
    report_id = store.save_result(make_result(), run_id="r", engine="offline")
    store.record_calls([_call("a", "plan", "ok"), _call("b", "search", "ok"),
                        _call("c", "plan", "served"), _call("d", "condense", "fallback")])
    backend = lake.backend_for(target)

    def make_v13(con: Any) -> None:  # as the v13 code left it
        con.execute("DROP VIEW llm_calls")
        con.execute(f"CREATE TABLE llm_calls AS SELECT {_V14_CALL_COLUMNS} FROM ledger")
        con.execute("DROP TABLE ledger")
        for column in ("parts_unanswered", "quotes", "pages", "sections",
                       "sections_without_evidence", "thin_evidence"):
            con.execute(f"ALTER TABLE reports DROP COLUMN {column}")
        con.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")

    backend.write(make_v13)
    backend._ready = False
    backend.ensure_schema()
    assert store.schema_version() == SCHEMA_VERSION
    assert query_readonly(target, "SELECT call_id, kind FROM ledger ORDER BY ALL")[1] == [
        ("a", "llm"), ("b", "search"), ("c", "served"), ("d", "fallback")]
    assert query_readonly(target, "SELECT call_id FROM llm_calls")[1] == [("a",)]
    assert query_readonly(target, "SELECT quotes, pages, parts_unanswered, thin_evidence FROM "
                                  "reports WHERE report_id = ?", [report_id])[1] == [
        (1, 1, 0, False)]
    assert store.usage().calls == 3


def _call(call_id: str, role: str, outcome: str) -> CallRecord:
    return CallRecord(call_id=call_id, run_id="r", batch_id="b1", topic_id=None,
                      subquestion_index=None, role=role, provider="openai", model="gpt-x",
                      outcome=outcome, cost_usd=0.0, created_at=datetime.now(timezone.utc))
