"""Schema v7's views on real DuckDB files: each answers the question its name asks, and a v6 file
gets them by migrating. Also home of `topic_result`, the small builder the query-side tests use."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest

from core.models import (Citation, Claim, Evidence, Finding, Report, ResearchPlan,
                         ResearchResult, Source, SubQuestion, Topic)
from core.reports.report import report_id_for
from core.store import SCHEMA_VERSION, ResultStore, query_readonly
from core.store import migrations
from core.accounting.usage import CallRecord
from tests.core.test_store_ledger import make_v1_file, schema_shape

VIEWS = ("latest_reports", "report_sources", "citation_quotes", "failures", "cost_by_batch")


def topic_result(text: str, *, batch: str = "b1", title: str | None = None,
                 body: str = "Body [1].", sources: Sequence[Source] = (),
                 citations: Sequence[Citation] = (), language: str = "en") -> ResearchResult:
    """One topic's result: a report whose markdown is a title, `body` and references."""
    topic = Topic(text=text, batch_id=batch)
    title = title or f"Report: {text}"
    refs = "\n".join(f"{c.number}. [{c.title}]({c.url}) — “{c.quote}”" for c in citations)
    markdown = f"# {title}\n\n## Summary\n\n{body}\n\n## References\n\n{refs}\n"
    evidence = tuple(Evidence(url=c.url, title=c.title, quote=c.quote) for c in citations)
    plan = ResearchPlan(topic=text, brief="brief",
                        subquestions=(SubQuestion(index=0, question="What?"),))
    findings = (Finding(subquestion_index=0, subquestion="What?",
                        claims=(Claim(text="A claim.", evidence=evidence),)),)
    report = Report(report_id=report_id_for(batch, topic.topic_id), topic=text, title=title,
                    markdown=markdown, citations=tuple(citations), engine="offline",
                    language=language)
    return ResearchResult(topic=topic, plan=plan, sources=tuple(sources), findings=findings,
                          report=report)


def rows(path: Path, sql: str) -> list[tuple]:
    return query_readonly(path, sql)[1]


def page(n: int, text: str = "Some page text.") -> Source:
    return Source(url=f"https://example.org/{n}", title=f"Page {n}", text=text)


def cite(number: int, source: Source, quote: str = "Some page text.") -> Citation:
    return Citation(number=number, url=source.url, title=source.title, quote=quote)


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "rf.duckdb")


def test_latest_reports_keeps_the_newest_report_per_topic(store: ResultStore) -> None:
    first = store.save_result(topic_result("DuckDB locking", title="Old"), run_id="r1",
                              engine="offline")
    other = store.save_result(topic_result("Prefect retries"), run_id="r1", engine="offline")
    # A rerun in the same batch replaces the report (same id, new row).
    again = store.save_result(topic_result("DuckDB locking", title="Rerun", language="zh"),
                              run_id="r2", engine="offline")
    assert again == first
    assert rows(store.path, "SELECT topic, title, language FROM latest_reports ORDER BY topic") \
        == [("DuckDB locking", "Rerun", "zh"), ("Prefect retries", "Report: Prefect retries", "en")]
    # A later batch on the same topic (spelt differently) supersedes it; the old one stays stored.
    newer = store.save_result(topic_result("duckdb locking ", batch="b2", title="Newest"),
                              run_id="r3", engine="llm")
    latest = rows(store.path, "SELECT report_id, batch_id, title, engine FROM latest_reports "
                              "ORDER BY report_id")
    assert sorted(latest) == sorted([(newer, "b2", "Newest", "llm"),
                                     (other, "b1", "Report: Prefect retries", "offline")])
    assert rows(store.path, "SELECT count(*) FROM reports") == [(3,)]
    columns, _ = query_readonly(store.path, "SELECT * FROM latest_reports")
    assert columns == ["report_id", "batch_id", "topic", "title", "language", "created_at",
                       "engine", "edition", "unanswered", "thin_evidence"]


def test_report_sources_lists_read_and_cited_sources(store: ResultStore) -> None:
    a, b, unused = page(1), page(2), page(3)
    gone = Source(url="https://gone.example/", title="Never stored", text="")
    report_id = store.save_result(topic_result(
        "Sources", sources=(a, b, unused),
        citations=(cite(1, a), cite(2, b), cite(3, a, "another quote"), cite(4, gone))),
        run_id="r1", engine="offline")
    got = rows(store.path, "SELECT report_id, number, url, title FROM report_sources "
                           "ORDER BY number NULLS LAST")
    assert got == [(report_id, 1, a.url, a.title), (report_id, 2, b.url, b.title),
                   (report_id, 4, gone.url, gone.title), (report_id, None, unused.url,
                                                          unused.title)]


def test_citation_quotes_carry_topic_and_report_title(store: ResultStore) -> None:
    a = page(1)
    report_id = store.save_result(topic_result(
        "Quotes", title="On quotes", sources=(a,),
        citations=(cite(1, a, "Some page"), cite(2, a, "text."))), run_id="r1", engine="offline")
    assert rows(store.path, "SELECT report_id, batch_id, topic, report_title, number, url, "
                            "title, quote FROM citation_quotes ORDER BY number") == [
        (report_id, "b1", "Quotes", "On quotes", 1, a.url, a.title, "Some page"),
        (report_id, "b1", "Quotes", "On quotes", 2, a.url, a.title, "text.")]


def test_failures_lists_failed_and_skipped_topics(store: ResultStore) -> None:
    store.save_result(topic_result("Fine topic"), run_id="r1", engine="offline")
    kept = store.save_result(topic_result("Flaky topic"), run_id="r1", engine="offline")
    store.record_failure("b1", Topic(text="Flaky topic", batch_id="b1"), "Timeout: 3 tries", "r2")
    store.record_failure("b1", Topic(text="Bad topic", batch_id="b1"), "ContextOverflow", "r2")
    store.record_skipped("b2", Topic(text="Costly topic", batch_id="b2"), "over budget", "r3")
    got = rows(store.path, "SELECT batch_id, topic, status, error, run_id, report_id, "
                           "updated_at IS NOT NULL FROM failures ORDER BY topic")
    assert got == [("b1", "Bad topic", "failed", "ContextOverflow", "r2", None, True),
                   ("b2", "Costly topic", "skipped", "over budget", "r3", None, True),
                   # a failure after a success keeps pointing at the earlier report
                   ("b1", "Flaky topic", "failed", "Timeout: 3 tries", "r2", kept, True)]


def test_cost_by_batch_joins_the_ledger_and_the_outcomes(store: ResultStore) -> None:
    first = store.save_result(topic_result("One"), run_id="r1", engine="llm")
    store.save_result(topic_result("Two"), run_id="r1", engine="llm")
    store.record_failure("b1", Topic(text="Three", batch_id="b1"), "boom", "r1")
    store.record_skipped("b2", Topic(text="Four", batch_id="b2"), "over budget", "r2")
    topic_id = Topic(text="One", batch_id="b1").topic_id
    store.record_calls([
        CallRecord(call_id="c1", run_id="r1", batch_id="b1", topic_id=topic_id,
                   subquestion_index=0, role="plan", provider="openai", model="m",
                   input_tokens=1000, output_tokens=200, cost_usd=0.25),
        CallRecord(call_id="c2", run_id="r1", batch_id="b1", topic_id=topic_id,
                   subquestion_index=0, role="write", provider="openai", model="m",
                   outcome="RateLimited", input_tokens=500, output_tokens=None,
                   cost_usd=0.15),
        CallRecord(call_id="c3", run_id="r9", batch_id="b9", topic_id=None,
                   subquestion_index=None, role="plan", provider="openai", model="m",
                   input_tokens=10, output_tokens=1, cost_usd=None)])
    got = {r[0]: r[1:] for r in rows(store.path, (
        "SELECT batch_id, topics, reports, failed, skipped, calls, failed_calls, input_tokens, "
        "output_tokens, round(cost_usd, 6), round(cost_per_report, 6), unpriced_calls "
        "FROM cost_by_batch"))}
    assert got == {"b1": (3, 2, 1, 0, 2, 1, 1500, 200, 0.4, 0.2, 0),
                   "b2": (1, 0, 0, 1, 0, 0, 0, 0, 0.0, None, 0),
                   "b9": (0, 0, 0, 0, 1, 0, 10, 1, 0.0, None, 1)}
    assert first  # the report that the ledger's calls paid for


def test_a_v6_file_gets_the_views_by_migrating(tmp_path: Path) -> None:
    path = tmp_path / "v6.duckdb"
    make_v1_file(path)
    con = duckdb.connect(str(path))
    for step in range(1, 6):  # the frozen steps up to v6; none of v7's views
        migrations.MIGRATIONS[step](con)
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    assert not rows(path, "SELECT view_name FROM duckdb_views() WHERE view_name IN "
                          f"{VIEWS}")

    store = ResultStore(path)
    assert store.schema_version() == SCHEMA_VERSION == 14
    assert rows(path, "SELECT report_id, title FROM latest_reports") == [("rep-ok", "Title")]
    assert rows(path, "SELECT topic, error FROM failures") == [
        ("A bad topic", "ContextOverflow: 200000 > 128000")]
    ResultStore(tmp_path / "fresh.duckdb")
    assert schema_shape(path) == schema_shape(tmp_path / "fresh.duckdb")
