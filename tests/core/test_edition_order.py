"""Editions in order on real DuckDB files: "previous" is the edition before this one by its
name, whatever order the runs were written in, and a report whose comparison no longer holds
(a backfill came between, or its predecessor was written again) is marked stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models import (Citation, Claim, Evidence, Finding, Report, ResearchPlan,
                         ResearchResult, Source, SubQuestion, Topic)
from core.reports.editions import compare, snapshot_of
from core.reports.report import report_id_for
from core.store import ResultStore, query_readonly
from core.store.schema import edition_order

TOPIC = "Threading or asyncio for sockets"
URL = "https://example.org/sockets"


def edition_result(edition: str, wait_ms: int) -> ResearchResult:
    """The topic's result in one edition: one page, one claim quoting how long it waits."""
    topic = Topic(text=TOPIC, batch_id="nightly", edition=edition)
    quote = f"A socket waits for {wait_ms} milliseconds."
    page = Source(url=URL, title="Sockets", text=f"Intro. {quote} More.")
    evidence = Evidence(url=URL, title=page.title, quote=quote)
    plan = ResearchPlan(topic=TOPIC, brief="brief",
                        subquestions=(SubQuestion(index=0, question="How long?"),))
    findings = (Finding(subquestion_index=0, subquestion="How long?",
                        claims=(Claim(text=f"It waits {wait_ms} ms.", evidence=(evidence,)),)),)
    report = Report(report_id=report_id_for(topic.batch_id, topic.topic_id), topic=TOPIC,
                    title="Sockets", markdown="# Sockets\n\nIt waits [1].", engine="offline",
                    citations=(Citation(number=1, url=URL, title=page.title, quote=quote),))
    return ResearchResult(topic=topic, plan=plan, sources=(page,), findings=findings,
                          report=report)


def save_edition(store: ResultStore, edition: str, wait_ms: int) -> str:
    """As flows/topic.py does: compare with the predecessor, store with the comparison."""
    result = edition_result(edition, wait_ms)
    previous = store.previous_edition(result.topic)
    diff = None if previous is None else compare(previous, snapshot_of(result, edition))
    return store.save_result(result, run_id=f"run-{edition}", engine="offline", diff=diff)


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "rf.duckdb")


def ordered(store: ResultStore, names: list[str | None]) -> list[str | None]:
    values = ", ".join("(?)" for _ in names)
    _, rows = query_readonly(store.path, f"SELECT e FROM (VALUES {values}) t(e) "
                                         f"ORDER BY {edition_order('e')}, coalesce(e, '')",
                             names)
    return [e for (e,) in rows]


def test_names_order_dates_by_date_and_numbers_by_value(store: ResultStore) -> None:
    want = [None, "2026-9-3", "2026-12-01", "2026-12-02", "2026-12-10", "2027-01-01",
            "v1.9", "v1.10", "v2", "Week-09", "week-9", "week-49"]
    assert ordered(store, list(reversed(want))) == want
    assert ordered(store, ["b", "A", "a10", "a9"]) == ["A", "a9", "a10", "b"]


def test_previous_is_the_edition_before_whatever_order_they_were_written_in(
        store: ResultStore) -> None:
    first = save_edition(store, "2026-12-01", 7)
    third = save_edition(store, "2026-12-03", 9)
    second = save_edition(store, "2026-12-02", 8)  # a backfill, run after the newer one

    def previous(edition: str) -> str | None:
        found = store.previous_edition(Topic(text=TOPIC, batch_id="nightly", edition=edition))
        return None if found is None else found.report_id

    assert previous("2026-11-30") is None
    assert previous("2026-12-01") is None
    assert previous("2026-12-02") == first  # not the newest written (third)
    assert previous("2026-12-03") == second
    assert previous("2026-12-04") == third
    # The backfill's own comparison is with its predecessor: 7 -> 8, not 9 -> 8.
    _, rows = query_readonly(store.path, "SELECT previous_report_id, kind, before, quote "
                                         "FROM changes WHERE report_id = ?", [second])
    assert [(p, k) for p, k, _, _ in rows] == [(first, "number_changed")]
    assert "7 milliseconds" in rows[0][2] and "8 milliseconds" in rows[0][3]


def test_a_comparison_that_no_longer_holds_is_marked_stale(store: ResultStore) -> None:
    first = save_edition(store, "2026-12-01", 7)
    third = save_edition(store, "2026-12-03", 9)

    def editions() -> dict[str, tuple]:
        _, rows = query_readonly(store.path, "SELECT report_id, n, previous_report_id, "
                                             "predecessor_report_id, stale FROM report_editions")
        return {r[0]: r[1:] for r in rows}

    assert editions() == {first: (1, None, None, False), third: (2, first, first, False)}
    second = save_edition(store, "2026-12-02", 8)
    # The backfill comes between: the third's stored comparison (with the first) is stale.
    assert editions() == {first: (1, None, None, False), second: (2, first, first, False),
                          third: (3, first, second, True)}
    _, rows = query_readonly(store.path, "SELECT report_id, previous_edition, changes, stale "
                                         "FROM report_changes ORDER BY edition")
    assert rows == [(second, "2026-12-01", 1, False), (third, "2026-12-01", 1, True)]

    # The third run again compares with its predecessor and is current again...
    assert save_edition(store, "2026-12-03", 9) == third
    assert editions()[third] == (3, second, second, False)
    # ...until that predecessor is written again after it.
    save_edition(store, "2026-12-02", 8)
    assert editions()[third] == (3, second, second, True)
    assert editions()[second] == (2, first, first, False)
