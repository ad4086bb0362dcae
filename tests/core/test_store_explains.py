"""A store that explains itself (issue 34, schema 14): every table, view and column has a
comment an analyst can read in DuckDB, and a report's evidence strength is in columns, not only
in its header's text (in four languages)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from core.models import Claim, Evidence, Finding, ReportDraft, SectionDraft
from core.reports.report import assemble
from core.store import ResultStore, query_readonly
from core.store.connection import release_all
from tests.core.test_outline import _plan
from tests.core.test_store import make_result
from tests.core.test_store_ledger import make_v1_file


def _uncommented(path: Path) -> list[tuple]:
    release_all()
    with duckdb.connect(str(path), read_only=True) as con:  # the analysts' copy
        return con.execute(
            "SELECT 'table', table_name, NULL FROM duckdb_tables() WHERE comment IS NULL "
            "UNION ALL SELECT 'view', view_name, NULL FROM duckdb_views() "
            "WHERE NOT internal AND comment IS NULL "
            "UNION ALL SELECT 'column', table_name, column_name FROM duckdb_columns() "
            "WHERE NOT internal AND comment IS NULL ORDER BY ALL").fetchall()


def test_every_table_view_and_column_has_a_comment(tmp_path: Path) -> None:
    path = tmp_path / "rf.duckdb"
    ResultStore(path)
    assert _uncommented(path) == []
    release_all()
    with duckdb.connect(str(path), read_only=True) as con:
        [(text,)] = con.execute("SELECT comment FROM duckdb_columns() WHERE table_name = "
                                "'ledger' AND column_name = 'kind'").fetchall()
    assert "served" in text and "fallback" in text


def test_a_migrated_store_is_commented_too(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    make_v1_file(path)
    ResultStore(path)
    assert _uncommented(path) == []


def test_a_thin_report_records_its_strength_in_columns(tmp_path: Path) -> None:
    """Before: thin evidence was only a line in the report's header, in the report's language."""
    plan = _plan(None, "asyncio vs threading", n=2)
    ev = Evidence(url="https://zh.example/a", title="甲", quote="异步编程使用事件循环调度协程。")
    findings = [Finding(subquestion_index=sq.index, subquestion=sq.question, claims=(
        Claim(text="异步编程使用事件循环调度协程。", evidence=(ev,), confidence="high"),))
        for sq in plan.subquestions]
    draft = ReportDraft(title="报告", summary="摘要 [E1]。", conclusion="结论。", sections=tuple(
        SectionDraft(subquestion_index=sq.index, heading=sq.question,
                     body="内容 [E1]。" if sq.index == plan.sections[0].index else "无。")
        for sq in plan.subquestions))
    report = assemble(plan, findings, draft, report_id="r_thin", engine="offline",
                      unanswered=("How they differ",))
    assert report.thin_evidence and report.sections == len(plan.sections)
    assert report.sections_without_evidence == len(plan.sections) - 1
    # the part whose section came out empty is unanswered as the report reads, beside the one
    # the gate found unanswered
    empty = plan.parts[plan.sections[1].part].heading
    assert report.unanswered == ("How they differ", empty) and empty in report.markdown.split(
        "\n## ", 1)[0]

    store = ResultStore(tmp_path / "rf.duckdb")
    result = make_result("asyncio vs threading")
    store.save_result(result.model_copy(update={"report": report}), run_id="r1",
                      engine="offline")
    store.save_result(make_result("Another topic"), run_id="r1", engine="offline")
    _, rows = query_readonly(store.path, (
        "SELECT topic, thin_evidence, parts_unanswered, quotes, pages, sections, "
        "sections_without_evidence FROM reports ORDER BY topic"))
    assert rows == [
        ("Another topic", False, 0, 1, 1, 0, 0),
        ("asyncio vs threading", True, 2, 1, 1, len(plan.sections), len(plan.sections) - 1)]
    _, latest = query_readonly(store.path, "SELECT topic FROM latest_reports WHERE thin_evidence")
    assert latest == [("asyncio vs threading",)]
