"""Schema v2 on real DuckDB files: migrating a v1 file, the usage ledger (llm_calls), its views,
per-run spend, skipped topics and the usage a report carries."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from core.models import Topic
from core.store import (SCHEMA_VERSION, TABLES, ResultStore, StoreError, query_readonly)
from core.store import migrations
from core.store.connection import live_path, release_all
from core.accounting.usage import CallRecord, UsageTotals
from core.store.source_versions import content_hash
from tests.core.test_store import make_result

# The version-1 schema exactly as core/store.py created it before the ledger existed (copied, so
# this test keeps meaning what it means whatever the current code says).
_V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ, status VARCHAR NOT NULL, engine VARCHAR, search_backend VARCHAR,
    settings_json JSON);
CREATE TABLE IF NOT EXISTS topics (
    topic_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic VARCHAR NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('succeeded', 'failed')), error VARCHAR,
    run_id VARCHAR, report_id VARCHAR, updated_at TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS subquestions (
    topic_id VARCHAR, idx INTEGER, question VARCHAR NOT NULL, queries VARCHAR[],
    PRIMARY KEY (topic_id, idx));
CREATE TABLE IF NOT EXISTS sources (
    source_id VARCHAR PRIMARY KEY, url VARCHAR NOT NULL, title VARCHAR, text VARCHAR,
    first_seen TIMESTAMPTZ NOT NULL, last_seen TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS topic_sources (
    topic_id VARCHAR, source_id VARCHAR, PRIMARY KEY (topic_id, source_id));
-- A finding with no claims keeps its raw notes in one row with claim_index -1 and claim NULL.
CREATE TABLE IF NOT EXISTS findings (
    topic_id VARCHAR, subquestion_index INTEGER, subquestion VARCHAR, claim_index INTEGER,
    claim VARCHAR, confidence VARCHAR, evidence JSON, raw_notes VARCHAR,
    PRIMARY KEY (topic_id, subquestion_index, claim_index));
CREATE TABLE IF NOT EXISTS citations (
    report_id VARCHAR, number INTEGER, url VARCHAR NOT NULL, title VARCHAR, quote VARCHAR,
    PRIMARY KEY (report_id, number));
CREATE TABLE IF NOT EXISTS reports (
    report_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic_id VARCHAR NOT NULL,
    topic VARCHAR NOT NULL, title VARCHAR, markdown VARCHAR NOT NULL, engine VARCHAR,
    flags VARCHAR[], created_at TIMESTAMPTZ NOT NULL);
"""

_V1_TABLES = ("runs", "topics", "subquestions", "sources", "topic_sources", "findings",
              "citations", "reports")
T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def make_v1_file(path: Path) -> None:
    """A version-1 store with rows in every table, as the old code left it."""
    con = duckdb.connect(str(path))
    con.execute(_V1_SCHEMA)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO runs VALUES ('r1', 'b1', ?, ?, 'completed', 'offline', 'corpus', "
                "'{\"model\": \"auto\"}')", [T0, T0 + timedelta(minutes=1)])
    con.execute("INSERT INTO topics VALUES ('t-ok', 'b1', 'A good topic', 'succeeded', NULL, "
                "'r1', 'rep-ok', ?), ('t-bad', 'b1', 'A bad topic', 'failed', "
                "'ContextOverflow: 200000 > 128000', 'r1', NULL, ?)", [T0, T0])
    con.execute("INSERT INTO subquestions VALUES ('t-ok', 0, 'Why?', ['q1', 'q2'])")
    con.execute("INSERT INTO sources VALUES ('s1', 'https://example.org/a', 'A', 'text a', ?, ?)",
                [T0, T0])
    con.execute("INSERT INTO topic_sources VALUES ('t-ok', 's1')")
    con.execute("INSERT INTO findings VALUES ('t-ok', 0, 'Why?', 0, 'Because.', 'high', "
                "'[]', 'notes')")
    con.execute("INSERT INTO citations VALUES ('rep-ok', 1, 'https://example.org/a', 'A', "
                "'text a')")
    con.execute("INSERT INTO reports VALUES ('rep-ok', 'b1', 't-ok', 'A good topic', 'Title', "
                "'# Title', 'offline', ['flag'], ?)", [T0])
    con.close()


# Columns later versions added to v1 tables, with the value an old row gets.
_ADDED = {"subquestions": {"wave": 1, "why": None, "parent": None},
          "reports": {"language": None, "edition": None, "previous_report_id": None,
                      "unanswered": None, "parts_unanswered": None, "quotes": None,
                      "pages": None, "sections": None, "sections_without_evidence": None,
                      "thin_evidence": None},
          "runs": {"host": None, "pid": None}, "topics": {"edition": None},
          "sources": {"content_hash": None}, "topic_sources": {"content_hash": None},
          "citations": {"content_hash": None}}


def dump(path: Path, table: str) -> list[tuple]:
    """A table's rows in its v1 columns (what a migration must keep)."""
    added = _has_added(path, table) if table in _ADDED else []
    rows = query_readonly(path, f"SELECT * EXCLUDE ({', '.join(added)}) FROM {table} "
                                "ORDER BY ALL" if added
                          else f"SELECT * FROM {table} ORDER BY ALL")[1]
    return rows


def _has_added(path: Path, table: str) -> list[str]:
    """The columns of `table` that later versions added, as far as this file has them."""
    _, cols = query_readonly(path, "SELECT column_name FROM duckdb_columns() "
                                   f"WHERE table_name = '{table}'")
    return [c for (c,) in cols if c in _ADDED[table]]


def added_values(path: Path, table: str) -> set[tuple]:
    """The values old rows got in the columns later versions added."""
    return set(query_readonly(path, f"SELECT {', '.join(_ADDED[table])} FROM {table}")[1])


def schema_shape(path: Path) -> dict[str, list[tuple]]:
    """Everything that defines the schema, in a comparable form."""
    queries = {
        "columns": "SELECT table_name, column_index, column_name, data_type, is_nullable "
                   "FROM duckdb_columns() WHERE NOT internal AND schema_name = 'main' ORDER BY ALL",
        "constraints": "SELECT table_name, constraint_type, constraint_text, "
                       "constraint_column_names FROM duckdb_constraints() "
                       "WHERE schema_name = 'main' ORDER BY ALL",
        "views": "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY ALL",
    }
    return {name: query_readonly(path, sql)[1] for name, sql in queries.items()}


def call(call_id: str, **changes: object) -> CallRecord:
    base = CallRecord(call_id=call_id, run_id="r1", batch_id="b1", topic_id=None,
                      subquestion_index=None, role="plan", provider="openai", model="gpt-x",
                      input_tokens=100, cached_input_tokens=10, output_tokens=20,
                      reasoning_tokens=5, latency_ms=12.5, cost_usd=0.01, created_at=T0)
    return replace(base, **changes)


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "rf.duckdb")


# -- schema version 2 and the migration from 1 -------------------------------------------------

def test_v1_file_migrates_keeping_every_row(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    make_v1_file(path)
    before = {t: dump(path, t) for t in _V1_TABLES}

    store = ResultStore(path)
    assert store.schema_version() == SCHEMA_VERSION == 14
    assert {t: dump(path, t) for t in _V1_TABLES} == before
    # v4: every old sub-question was the plan's (wave 1); old reports name no language, and
    # (v12) no unanswered part: the gate did not exist when they were written.
    assert added_values(path, "subquestions") == {(1, None, None)}
    # (v14) evidence strength: counted from the citations and the header; sections unknown.
    assert added_values(path, "reports") == {(None, None, None, None, 0, 1, 1, None, None,
                                              False)}
    # v13: the stored text is the page's one version; what read or cited it names it.
    version = content_hash("text a")
    for table in ("sources", "topic_sources", "citations"):
        assert added_values(path, table) == {(version,)}
    assert store.unverified_citations("rep-ok") == []
    assert store.counts() == {t: len(before[t]) for t in _V1_TABLES} | {
        "ledger": 0, "model_limits": 0, "pages": 0, "searches": 0,
                              "changes": 0}
    assert list(store.counts()) == list(TABLES)
    # The old rows behave as before: the failure keeps its error, the report is readable.
    assert store.topic_status("t-bad")["error"] == "ContextOverflow: 200000 > 128000"
    report = store.get_report("rep-ok")
    assert report["citations"][0]["quote"] == "text a" and report["usage"] == UsageTotals()

    # The new CHECK accepts 'skipped', still refuses nonsense; the ledger takes rows.
    store.record_skipped("b1", Topic(text="Skipped topic", batch_id="b1"), "over budget", "r2")
    release_all()
    con = duckdb.connect(str(live_path(path)))
    try:
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO topics VALUES ('x', 'b1', 'x', 'bogus', NULL, NULL, NULL, "
                        "now(), NULL)")
    finally:
        con.close()
    store.record_calls([call("c1", topic_id="t-ok")])
    assert store.get_report("rep-ok")["usage"].calls == 1
    ResultStore(path)  # reopening a migrated file changes nothing
    assert store.schema_version() == SCHEMA_VERSION and store.counts()["topics"] == 3


def test_migrated_file_has_the_schema_of_a_fresh_one(tmp_path: Path) -> None:
    make_v1_file(tmp_path / "old.duckdb")
    ResultStore(tmp_path / "old.duckdb")
    ResultStore(tmp_path / "new.duckdb")
    migrated, fresh = schema_shape(tmp_path / "old.duckdb"), schema_shape(tmp_path / "new.duckdb")
    assert migrated == fresh
    assert {v[0] for v in fresh["views"]} == {
        "usage_by_topic", "usage_by_batch", "latest_reports", "report_sources",
        "citation_quotes", "failures", "cost_by_batch", "report_editions", "report_changes",
        "fallbacks", "source_versions", "llm_calls"}


def test_failed_migration_leaves_the_v1_file_untouched(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.duckdb"
    make_v1_file(path)
    before = {t: dump(path, t) for t in _V1_TABLES}
    real_step = migrations.MIGRATIONS[1]

    def half_then_crash(con: duckdb.DuckDBPyConnection) -> None:
        real_step(con)
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(migrations.MIGRATIONS, 1, half_then_crash)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ResultStore(path)
    assert query_readonly(path, "SELECT value FROM meta")[1] == [("1",)]
    assert {t: dump(path, t) for t in _V1_TABLES} == before
    _, tables = query_readonly(path, "SELECT table_name FROM duckdb_tables() "
                                     "WHERE table_name = 'llm_calls'")
    assert tables == []
    monkeypatch.setitem(migrations.MIGRATIONS, 1, real_step)
    assert ResultStore(path).schema_version() == SCHEMA_VERSION


def test_unknown_old_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rf.duckdb"
    ResultStore(path)
    con = duckdb.connect(str(live_path(path)))
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="cannot migrate"):
        ResultStore(path)


def test_llm_calls_columns_are_the_callrecord_fields(store: ResultStore) -> None:
    cols, _ = query_readonly(store.path, "SELECT * FROM llm_calls")
    assert cols == [f.name for f in fields(CallRecord)]


# -- the ledger ----------------------------------------------------------------------------------

def test_record_calls_is_idempotent_and_round_trips(store: ResultStore) -> None:
    first = call("c1", topic_id="t1", subquestion_index=2, tokens_estimated=True,
                 error=None)
    failed = call("c2", outcome="RateLimited", input_tokens=None, cached_input_tokens=None,
                  output_tokens=None, reasoning_tokens=None, cost_usd=None, error="429 slow down")
    store.record_calls([first, failed, first])  # a duplicate inside one write, too
    store.record_calls([first, failed])  # a retried write
    store.record_calls([])
    assert store.counts()["ledger"] == 2
    # The first write wins: a changed record under a stored call_id is not applied.
    store.record_calls([replace(first, cost_usd=99.0)])
    assert store.spent_usd(run_id="r1") == pytest.approx(0.01)

    _, rows = query_readonly(store.path, "SELECT * FROM llm_calls ORDER BY call_id")
    stored = [dict(zip([f.name for f in fields(CallRecord)], row)) for row in rows]
    assert stored[0] | {"created_at": T0} == first.__dict__
    assert stored[0]["created_at"] == T0  # same instant, whatever zone DuckDB renders it in
    assert stored[1]["input_tokens"] is None and stored[1]["error"] == "429 slow down"


def test_record_calls_is_one_transaction(store: ResultStore) -> None:
    broken = call("c9", run_id=None)  # run_id is NOT NULL
    with pytest.raises(duckdb.ConstraintException):
        store.record_calls([call("c1"), broken])
    assert store.counts()["ledger"] == 0


def _ledger(store: ResultStore) -> dict[str, str]:
    """Two topics in b1 (one saved with a report), one in b2; two runs. Returns topic ids."""
    saved = make_result("Saved topic one", batch="b1")
    store.save_result(saved, run_id="r1", engine="openai")
    t1 = saved.topic.topic_id
    t2 = Topic(text="Unsaved topic two", batch_id="b1").topic_id
    t3 = Topic(text="Other batch topic", batch_id="b2").topic_id
    store.record_calls([
        call("a1", topic_id=t1, created_at=T0),
        call("a2", topic_id=t1, role="search", provider="serpapi", model="google",
             input_tokens=None, cached_input_tokens=None, output_tokens=None,
             reasoning_tokens=None, cost_usd=0.015, created_at=T0 + timedelta(seconds=5)),
        call("a3", topic_id=t1, outcome="ContextOverflow", input_tokens=None,
             cached_input_tokens=None, output_tokens=None, reasoning_tokens=None,
             cost_usd=None, created_at=T0 + timedelta(seconds=9)),  # failed: not "unpriced"
        call("a4", topic_id=t1, run_id="r2", model="mystery-model", cost_usd=None,
             created_at=T0 + timedelta(seconds=60)),  # ok but unpriced
        call("b1", topic_id=t2, cost_usd=0.5, input_tokens=1000, cached_input_tokens=None),
        call("c1", topic_id=t3, batch_id="b2", run_id="r3", cost_usd=2.0),
    ])
    return {"t1": t1, "t2": t2, "t3": t3, "report_id": saved.report.report_id}


def test_usage_views_sum_the_ledger(store: ResultStore) -> None:
    ids = _ledger(store)
    cols, rows = query_readonly(store.path, "SELECT * FROM usage_by_topic ORDER BY batch_id, "
                                            "calls DESC")
    assert cols == ["batch_id", "topic_id", "topic", "edition", "status", "engine", "calls",
                    "failed_calls", "searches", "input_tokens", "cached_input_tokens",
                    "output_tokens", "reasoning_tokens", "cost_usd", "unpriced_calls",
                    "served_calls", "fallbacks", "fallback_roles", "subquestions",
                    "sources_read", "claims", "quotes", "first_call_at", "last_call_at"]
    by_topic = {row[1]: dict(zip(cols, row)) for row in rows}
    t1 = by_topic[ids["t1"]]
    assert (t1["batch_id"], t1["topic"]) == ("b1", "Saved topic one")
    assert (t1["calls"], t1["failed_calls"], t1["searches"], t1["unpriced_calls"]) == (4, 1, 1, 1)
    # NULL tokens (the search and the failed call) count as 0.
    assert (t1["input_tokens"], t1["cached_input_tokens"], t1["output_tokens"],
            t1["reasoning_tokens"]) == (200, 20, 40, 10)
    assert t1["cost_usd"] == pytest.approx(0.025)
    assert (t1["first_call_at"], t1["last_call_at"]) == (T0, T0 + timedelta(seconds=60))
    t2 = by_topic[ids["t2"]]
    assert t2["topic"] is None  # no topics row yet: the FULL JOIN keeps the calls
    assert (t2["calls"], t2["input_tokens"], t2["cached_input_tokens"]) == (1, 1000, 0)

    cols, rows = query_readonly(store.path, "SELECT * FROM usage_by_batch ORDER BY batch_id")
    assert cols[:3] == ["batch_id", "topics", "calls"]
    b1, b2 = (dict(zip(cols, row)) for row in rows)
    assert (b1["batch_id"], b1["topics"], b1["calls"], b1["failed_calls"]) == ("b1", 2, 5, 1)
    assert b1["cost_usd"] == pytest.approx(0.525) and b1["unpriced_calls"] == 1
    assert (b2["topics"], b2["calls"], b2["cost_usd"]) == (1, 1, 2.0)

    # store.usage() counts exactly like the views.
    assert store.usage(batch_id="b1", topic_id=ids["t1"]) == UsageTotals(
        calls=4, failed_calls=1, searches=1, input_tokens=200, cached_input_tokens=20,
        output_tokens=40, reasoning_tokens=10, cost_usd=pytest.approx(0.025), unpriced_calls=1)
    assert store.usage(batch_id="b1").calls == 5 and store.usage().calls == 6
    assert store.usage().cost_usd == pytest.approx(2.525)
    assert store.usage(run_id="r2") == UsageTotals(
        calls=1, input_tokens=100, cached_input_tokens=10, output_tokens=20,
        reasoning_tokens=5, unpriced_calls=1)
    assert store.usage(run_id="r1", topic_id=ids["t1"]).calls == 3
    assert store.usage(run_id="nobody") == UsageTotals()


def test_spent_usd_per_run_and_topic(store: ResultStore) -> None:
    ids = _ledger(store)
    assert store.spent_usd(run_id="r1") == pytest.approx(0.525)
    assert store.spent_usd(run_id="r1", topic_id=ids["t1"]) == pytest.approx(0.025)
    assert store.spent_usd(run_id="r2") == 0.0  # only an unpriced call
    assert store.spent_usd(run_id="r3", topic_id=ids["t3"]) == 2.0
    assert store.spent_usd(run_id="r3", topic_id=ids["t1"]) == 0.0
    assert store.spent_usd(run_id="never") == 0.0


def test_report_carries_the_usage_of_its_topic(store: ResultStore) -> None:
    ids = _ledger(store)
    report = store.get_report(ids["report_id"])
    usage = report["usage"]
    assert isinstance(usage, UsageTotals)
    assert (usage.calls, usage.failed_calls, usage.unpriced_calls) == (4, 1, 1)  # runs r1 + r2
    assert usage.cost_usd == pytest.approx(0.025)
    assert "4 calls, 1 failed, 1 searches" in usage.line()
    assert store.usage(report_id=ids["report_id"]) == usage
    assert store.usage(report_id=ids["report_id"], run_id="r2").calls == 1
    assert store.usage(report_id="no-such-report") == UsageTotals()
    # A rerun replaces the report but never the calls that were paid for.
    store.save_result(make_result("Saved topic one", batch="b1"), run_id="r4", engine="openai")
    assert store.counts()["ledger"] == 6
    assert store.get_report(ids["report_id"])["usage"] == usage


def test_report_without_calls_has_zero_usage(store: ResultStore) -> None:
    result = make_result()
    store.save_result(result, run_id="r1", engine="offline")
    assert store.get_report(result.report.report_id)["usage"] == UsageTotals()


# -- skipped topics ------------------------------------------------------------------------------

def test_record_skipped(store: ResultStore) -> None:
    fresh = Topic(text="Never started", batch_id="b1")
    store.record_skipped("b1", fresh, "budget of $1.00 spent", run_id="r1")
    status = store.topic_status(fresh.topic_id)
    assert (status["status"], status["error"], status["report_id"]) == (
        "skipped", "budget of $1.00 spent", None)
    assert store.counts()["reports"] == 0

    result = make_result()
    store.save_result(result, run_id="r1", engine="offline")
    store.record_skipped("b1", result.topic, "budget spent", run_id="r2")
    status = store.topic_status(result.topic.topic_id)
    assert (status["status"], status["error"], status["run_id"]) == ("skipped", "budget spent",
                                                                    "r2")
    assert status["report_id"] == result.report.report_id  # the earlier report stays
    assert store.get_report(result.report.report_id) is not None
    assert "budget" not in store.get_report(result.report.report_id)["markdown"]

    store.record_failure("b1", result.topic, "Fatal: bad key", run_id="r3")
    assert store.topic_status(result.topic.topic_id)["status"] == "failed"
    store.save_result(result, run_id="r4", engine="offline")
    status = store.topic_status(result.topic.topic_id)
    assert (status["status"], status["error"]) == ("succeeded", None)
    with pytest.raises(ValueError):
        store.record_skipped("another-batch", result.topic, "x", run_id="r5")


# -- schema version 14: the ledger by kind, offline usage --------------------------------------

def test_the_ledger_says_what_each_row_is_and_llm_calls_holds_only_llm_calls(
        store: ResultStore) -> None:
    """Before: one table `llm_calls` held searches, served repeats and fallbacks too, so
    `SELECT count(*) FROM llm_calls` overcounted the LLM calls."""
    store.record_calls([
        call("l1"), call("l2", outcome="RateLimited", cost_usd=None),
        call("s1", role="search", provider="serpapi", model="google"),
        call("m1", outcome="served", cost_usd=0.0),
        call("m2", role="search", provider="serpapi", model="google", outcome="served"),
        call("f1", role="condense", outcome="fallback", provider="offline", model="extractive"),
    ])
    assert query_readonly(store.path, "SELECT call_id, kind FROM ledger ORDER BY call_id")[1] == [
        ("f1", "fallback"), ("l1", "llm"), ("l2", "llm"), ("m1", "served"), ("m2", "served"),
        ("s1", "search")]
    assert query_readonly(store.path, "SELECT call_id FROM llm_calls ORDER BY call_id")[1] == [
        ("l1",), ("l2",)]
    assert store.usage().calls == 5 and store.usage().fallbacks == 1  # the totals are as before


def test_a_v13_ledger_migrates_to_rows_with_their_kind(tmp_path: Path) -> None:
    path = tmp_path / "v13.duckdb"
    make_v1_file(path)
    con = duckdb.connect(str(path))
    for step in range(1, 13):
        migrations.MIGRATIONS[step](con)
    con.execute("UPDATE meta SET value = '13' WHERE key = 'schema_version'")
    for call_id, role, outcome in (("a", "plan", "ok"), ("b", "search", "ok"),
                                   ("c", "plan", "served"), ("d", "plan", "fallback"),
                                   ("e", "report", "ContextOverflow")):
        con.execute("INSERT INTO llm_calls VALUES (?, 'r1', 'b1', NULL, NULL, ?, 'openai', "
                    "'gpt-x', ?, 1, 0, 1, 0, false, 1.0, 0.001, NULL, now())",
                    [call_id, role, outcome])
    con.close()
    store = ResultStore(path)
    assert query_readonly(path, "SELECT call_id, kind FROM ledger ORDER BY call_id")[1] == [
        ("a", "llm"), ("b", "search"), ("c", "served"), ("d", "fallback"), ("e", "llm")]
    assert query_readonly(path, "SELECT count(*) FROM llm_calls")[1] == [(2,)]
    assert store.usage().calls == 4  # what the old table summed, kept
    _, kinds = query_readonly(path, "SELECT table_type FROM information_schema.tables "
                                    "WHERE table_name = 'llm_calls'")
    assert kinds == [("VIEW",)]


def test_usage_views_show_an_offline_topic_with_nothing_spent_and_its_work_counted(
        store: ResultStore) -> None:
    """Before: usage_by_topic and usage_by_batch listed only ledger rows, and the offline
    engine writes none, so an offline batch was missing from both."""
    result = make_result("Offline topic", batch="nightly")
    store.save_result(result, run_id="r1", engine="offline")
    cols, rows = query_readonly(store.path, "SELECT * FROM usage_by_topic")
    [topic] = [dict(zip(cols, row)) for row in rows]
    assert (topic["batch_id"], topic["topic"], topic["status"], topic["engine"]) == (
        "nightly", "Offline topic", "succeeded", "offline")
    assert (topic["calls"], topic["cost_usd"], topic["fallback_roles"]) == (0, 0.0, "")
    assert topic["subquestions"] == len(result.plan.subquestions) > 0
    assert topic["sources_read"] == len(result.sources) and topic["claims"] > 0
    assert topic["quotes"] == len(result.report.citations)
    cols, rows = query_readonly(store.path, "SELECT * FROM usage_by_batch")
    [batch] = [dict(zip(cols, row)) for row in rows]
    assert (batch["batch_id"], batch["topics"], batch["calls"], batch["cost_usd"]) == (
        "nightly", 1, 0, 0.0)
    assert batch["subquestions"] == topic["subquestions"]
