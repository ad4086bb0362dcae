"""ResultStore on real DuckDB files: schema, idempotent saves, failures, read-only queries,
quote verification, threads, another process holding the file, and secrets kept out."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest
from pydantic import SecretStr

from core.models import (Citation, Claim, Evidence, Finding, Report, ResearchPlan,
                         ResearchResult, Source, SubQuestion, Topic, stable_id)
from core.settings import Settings
from core.store import (SCHEMA_VERSION, TABLES, ReadOnlyQueryError, ResultStore, StoreError,
                        StoreLockedError, public_settings, query_readonly)
from core.store.connection import live_path, release_all

SHARED = Source(url="https://example.org/duckdb", title="DuckDB concurrency",
                text="DuckDB allows one process to write.\nMany threads may share it.")


def make_result(text: str = "How does DuckDB handle concurrency?", batch: str = "b1",
                extra_source: Source | None = None, quote: str | None = None,
                citation_url: str | None = None) -> ResearchResult:
    topic = Topic(text=text, batch_id=batch)
    sources = (SHARED,) + ((extra_source,) if extra_source else ())
    quote = quote if quote is not None else "one process to write"
    evidence = Evidence(url=SHARED.url, title=SHARED.title, quote=quote)
    plan = ResearchPlan(topic=text, brief="brief", subquestions=(
        SubQuestion(index=0, question="Who may write?", queries=("duckdb writer", "duckdb lock")),
        SubQuestion(index=1, question="Threads?", queries=("duckdb threads",)),
    ))
    findings = (
        Finding(subquestion_index=0, subquestion="Who may write?", raw_notes="notes 0", claims=(
            Claim(text="One writer process.", evidence=(evidence,), confidence="high"),
            Claim(text="Readers wait.", confidence="medium"),
        )),
        Finding(subquestion_index=1, subquestion="Threads?", raw_notes="nothing found", claims=()),
    )
    report_id = stable_id(batch, text, "report")
    report = Report(
        report_id=report_id, topic=text, title=f"Report: {text}", markdown="# Title\nBody [1]",
        engine="offline", flags=("number-not-in-quote",),
        citations=(Citation(number=1, url=citation_url or SHARED.url, title=SHARED.title,
                            quote=quote),))
    return ResearchResult(topic=topic, plan=plan, sources=sources, findings=findings,
                          report=report)


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "rf.duckdb")


def test_schema_created_once_and_versioned(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "rf.duckdb"
    first = ResultStore(path)
    again = ResultStore(path)  # reopening must not fail or reset anything
    assert again.schema_version() == SCHEMA_VERSION == first.schema_version()
    assert again.counts() == {t: 0 for t in TABLES}
    cols, rows = query_readonly(path, "SELECT count(*) FROM meta")
    assert rows == [(1,)]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rf.duckdb"
    ResultStore(path)
    con = duckdb.connect(str(live_path(path)))  # what researchflow writes and reads
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="schema version 99"):
        ResultStore(path)


def test_save_stores_every_part(store: ResultStore) -> None:
    result = make_result()
    report_id = store.save_result(result, run_id="r1", engine="offline")
    assert report_id == result.report.report_id
    counts = store.counts()
    assert counts == {"runs": 0, "topics": 1, "subquestions": 2, "sources": 1,
                      "topic_sources": 1, "findings": 3, "citations": 1, "reports": 1,
                      "ledger": 0, "model_limits": 0, "pages": 0, "searches": 0,
                              "changes": 0}
    report = store.get_report(report_id)
    assert report is not None
    assert report["markdown"] == "# Title\nBody [1]"
    assert report["topic_id"] == result.topic.topic_id and report["batch_id"] == "b1"
    assert report["flags"] == ["number-not-in-quote"]
    assert report["citations"] == [{"number": 1, "url": SHARED.url, "title": SHARED.title,
                                    "quote": "one process to write"}]
    _, rows = query_readonly(store.path, "SELECT queries FROM subquestions ORDER BY idx")
    assert rows == [(["duckdb writer", "duckdb lock"],), (["duckdb threads"],)]
    _, rows = query_readonly(store.path, "SELECT claim_index, claim, evidence, raw_notes FROM "
                                         "findings ORDER BY subquestion_index, claim_index")
    assert json.loads(rows[0][2])[0]["quote"] == "one process to write"
    assert rows[2][0] == -1 and rows[2][1] is None and rows[2][3] == "nothing found"
    _, rows = query_readonly(store.path, "SELECT text FROM sources")
    assert rows == [(SHARED.text,)]
    assert store.get_report("missing") is None


def test_saving_twice_replaces_rows(store: ResultStore) -> None:
    store.save_result(make_result(), run_id="r1", engine="offline")
    before = store.counts()
    store.save_result(make_result(), run_id="r2", engine="offline")
    assert store.counts() == before
    # A rerun with fewer parts shrinks the topic's rows rather than keeping stale ones.
    smaller = make_result().model_copy(update={"findings": ()})
    store.save_result(smaller, run_id="r3", engine="offline")
    assert store.counts()["findings"] == 0
    assert store.topic_status(smaller.topic.topic_id)["run_id"] == "r3"


def test_two_topics_share_one_source_row(store: ResultStore) -> None:
    """The same text read by two topics is one row: its title and last_seen follow the latest
    read, its first_seen stays."""
    store.save_result(make_result("Topic number one"), run_id="r1", engine="offline")
    retitled = SHARED.model_copy(update={"title": "DuckDB concurrency, retitled"})
    store.save_result(make_result("Topic number two").model_copy(
        update={"sources": (retitled,)}), run_id="r1", engine="offline")
    counts = store.counts()
    assert counts["sources"] == 1 and counts["topic_sources"] == 2 and counts["reports"] == 2
    _, rows = query_readonly(store.path, "SELECT title, text, first_seen < last_seen FROM "
                                         f"sources WHERE source_id = '{SHARED.source_id}'")
    assert rows == [("DuckDB concurrency, retitled", SHARED.text, True)]
    assert len(store.list_reports("b1")) == 2 and store.list_reports("other") == []


def test_failure_then_success(store: ResultStore) -> None:
    result = make_result()
    topic = result.topic
    store.record_failure("b1", topic, "ContextOverflow: 200000 > 128000", run_id="r1")
    status = store.topic_status(topic.topic_id)
    assert status["status"] == "failed" and "ContextOverflow" in status["error"]
    assert status["report_id"] is None
    assert store.counts()["reports"] == 0 and store.list_reports() == []

    store.save_result(result, run_id="r2", engine="offline")
    status = store.topic_status(topic.topic_id)
    assert status["status"] == "succeeded" and status["error"] is None
    assert status["report_id"] == result.report.report_id
    assert store.counts()["topics"] == 1
    # The error never reaches the report text.
    assert "ContextOverflow" not in store.get_report(result.report.report_id)["markdown"]


def test_failure_after_success_keeps_the_good_report(store: ResultStore) -> None:
    result = make_result()
    store.save_result(result, run_id="r1", engine="offline")
    store.record_failure("b1", result.topic, "Fatal: bad key", run_id="r2")
    status = store.topic_status(result.topic.topic_id)
    assert (status["status"], status["error"]) == ("failed", "Fatal: bad key")
    assert status["report_id"] == result.report.report_id
    assert store.get_report(result.report.report_id) is not None
    with pytest.raises(ValueError):
        store.record_failure("another-batch", result.topic, "x", run_id="r2")


def test_failed_save_rolls_back(store: ResultStore) -> None:
    store.save_result(make_result(), run_id="r1", engine="offline")
    before = store.counts()
    broken = make_result()
    dup = broken.report.citations[0]
    broken = broken.model_copy(update={"report": broken.report.model_copy(
        update={"citations": (dup, dup)})})  # duplicate (report_id, number) violates the key
    with pytest.raises(duckdb.ConstraintException):
        store.save_result(broken, run_id="r2", engine="offline")
    assert store.counts() == before
    assert store.topic_status(broken.topic.topic_id)["run_id"] == "r1"


def test_query_readonly_refuses_writes(store: ResultStore) -> None:
    store.save_result(make_result(), run_id="r1", engine="offline")
    cols, rows = query_readonly(store.path, "SELECT report_id, title FROM reports")
    assert cols == ["report_id", "title"] and len(rows) == 1
    for sql in ("INSERT INTO reports (report_id) VALUES ('x')", "DROP TABLE reports",
                "DELETE FROM sources"):
        with pytest.raises(ReadOnlyQueryError, match="read-only"):
            query_readonly(store.path, sql)
    assert store.counts()["reports"] == 1 and store.counts()["sources"] == 1
    with pytest.raises(StoreError, match="query failed"):
        query_readonly(store.path, "SELEC nonsense")
    with pytest.raises(StoreError, match="no researchflow store"):
        query_readonly(store.path.parent / "absent.duckdb", "SELECT 1")


def test_unverified_citations_finds_planted_quote(store: ResultStore) -> None:
    good = make_result("Good topic here", quote="one process to write.  Many threads")
    bad = make_result("Bad topic here", quote="DuckDB allows unlimited writers")
    lost = make_result("Lost topic here", citation_url="https://example.org/never-fetched")
    for r in (good, bad, lost):
        store.save_result(r, run_id="r1", engine="offline")
    # Whitespace differences (a reflowed line break) are tolerated; invented text is not.
    assert store.unverified_citations(good.report.report_id) == []
    [row] = store.unverified_citations(bad.report.report_id)
    assert row["quote"] == "DuckDB allows unlimited writers"
    assert row["reason"] == "quote not in source text"
    [row] = store.unverified_citations(lost.report.report_id)
    assert row["reason"] == "source not stored"


def test_concurrent_saves_from_threads(store: ResultStore) -> None:
    topics = [f"Concurrent topic {i}" for i in range(4)]
    errors: list[BaseException] = []

    def work(text: str) -> None:
        try:
            for _ in range(3):  # repeated saves of the same topic must not grow the tables
                store.save_result(make_result(text), run_id="r1", engine="offline")
                query_readonly(store.path, "SELECT count(*) FROM reports")
        except BaseException as exc:  # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in topics]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.counts() == {"runs": 0, "topics": 4, "subquestions": 8, "sources": 1,
                              "topic_sources": 4, "findings": 12, "citations": 4, "reports": 4,
                              "ledger": 0, "model_limits": 0, "pages": 0, "searches": 0,
                              "changes": 0}


def test_runs_never_store_secrets(store: ResultStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdef123456")
    settings = Settings.load()
    leaky = settings.public_dict() | {
        "openai_api_key": "sk-live-abcdef123456",  # a caller passed the raw value
        "anthropic_api_key": SecretStr("sk-ant-secret-999999"),
        "client_secret": "hunter2", "hf_token": "hf_abcdef", "nested": {"api_token": "t0k3n"},
        "mystery": "sk-proj-0123456789",
    }
    store.start_run("run-1", "b1", "offline", "corpus", leaky)
    store.start_run("run-1", "b1", "offline", "corpus", leaky)  # a retry: still one row
    store.finish_run("run-1", "completed")
    _, rows = query_readonly(store.path, "SELECT settings_json, status, finished_at IS NOT NULL "
                                         "FROM runs")
    assert len(rows) == 1 and rows[0][1:] == ("completed", True)
    raw = rows[0][0]
    for secret in ("sk-live", "sk-ant", "hunter2", "hf_abcdef", "t0k3n", "sk-proj"):
        assert secret not in raw
    stored = json.loads(raw)
    assert stored["anthropic_api_key"] == "set" and stored["gemini_api_key"] == "unset"
    assert "openai_api_key" not in stored  # a raw value under a key name is dropped
    assert stored["max_output_tokens"] == settings.max_output_tokens  # "tokens" is not secret
    assert stored["nested"] == {}
    with pytest.raises(StoreError, match="no run"):
        store.finish_run("never-started", "completed")


def test_public_settings_keeps_set_unset_markers() -> None:
    assert public_settings({"openai_api_key": "set", "serpapi_api_key": "unset",
                            "model": "auto"}) == {
        "openai_api_key": "set", "serpapi_api_key": "unset", "model": "auto"}


_HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
con.close()
"""


def test_other_process_lock_gives_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "rf.duckdb"
    store = ResultStore(path, lock_timeout=0.2)
    store.save_result(make_result(), run_id="r1", engine="offline")
    # Between writes the file is free: another process can read it.
    reader = subprocess.run(
        [sys.executable, "-c", "import sys; from core.store import query_readonly; "
         "print(query_readonly(sys.argv[1], 'SELECT count(*) FROM reports')[1])", str(path)],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.strip() == "[(1,)]"

    release_all()  # the other process is the holder now
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(live_path(path))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError) as info:
            store.save_result(make_result(), run_id="r2", engine="offline")
        message = str(info.value)
        assert str(path) in message and f"PID {holder.pid}" in message
        assert "retry" in message
        with pytest.raises(StoreLockedError):
            query_readonly(path, "SELECT 1", lock_timeout=0.1)
    finally:
        holder.communicate("\n", timeout=30)
    # Once the other process lets go, writes work again.
    store.save_result(make_result(), run_id="r3", engine="offline")
    assert store.topic_status(make_result().topic.topic_id)["run_id"] == "r3"
