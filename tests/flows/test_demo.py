"""The demo itself: examples/topics.csv, offline, over the bundled CPython documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store import ResultStore, query_readonly
from flows.batch import research_batch

# On one worker with tests/core/test_pydocs.py: the docs corpus is materialized once for both.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.xdist_group("pydocs")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "topics.csv"


def test_demo_batch_cites_verbatim_with_a_section_per_subquestion(db_path):
    state = research_batch(csv_path=str(EXAMPLES), model="offline", search="corpus",
                           db_path=str(db_path), return_state=True)
    assert state.is_completed(), state.message

    store = ResultStore(db_path)
    reports = store.list_reports("topics")
    assert len(reports) == 3
    total_citations = 0
    for summary in reports:
        report = store.get_report(summary["report_id"])
        md = report["markdown"]
        assert "Extractive offline report" in md.split("\n## ")[0]
        _, subqs = query_readonly(db_path, "SELECT s.question FROM subquestions s JOIN reports r "
                                  f"USING (topic_id) WHERE r.report_id = '{summary['report_id']}'")
        assert subqs
        for (question,) in subqs:
            assert f"\n## {question}\n" in md
        assert "\n## References\n" in md
        numbers = [c["number"] for c in report["citations"]]
        assert numbers == list(range(1, len(numbers) + 1))
        for n in numbers:
            assert f"\n{n}. " in md
        assert store.unverified_citations(summary["report_id"]) == []
        total_citations += len(numbers)
        if "\n## Comparison\n" in md:
            _assert_every_column_has_evidence(md)
    assert total_citations >= 6, "the demo corpus should answer the demo topics"


def _assert_every_column_has_evidence(md: str) -> None:
    """Each option's column holds at least one cited sentence (issue 21: the multiprocessing
    column was "—" in every row, its pages being API listings that never name it)."""
    table = [line for line in md.split("\n## Comparison\n", 1)[1].split("\n\n## ", 1)[0]
             .splitlines() if line.startswith("|")]
    header, rows = table[0], table[2:]
    options = [c.strip() for c in header.strip("|").split("|")][1:]
    assert len(options) >= 2 and rows
    for i, option in enumerate(options, start=1):
        cells = [[c.strip() for c in row.strip("|").split(" | ")][i] for row in rows]
        assert any(c != "—" for c in cells), f"no evidence for {option}: {cells}"
