"""Report assembly (core/reports/report.py): references numbered in code, gaps and disputes made
visible."""

from __future__ import annotations

import re

from core.models import ReportDraft, SectionDraft
from core.models import Claim, Evidence, Finding, ResearchPlan, SubQuestion
from core.reports.report import INSUFFICIENT, assemble, evidence_catalog, report_id_for

POOL = Evidence(url="https://docs.example/pool", title="Pools",
                quote="The pool starts 40 worker processes by default since version 3.12.")
LOOP = Evidence(url="https://docs.example/loop", title="Event loop",
                quote="The event loop runs in one thread and switches tasks at await points.")
LOOP_OTHER = Evidence(url="https://docs.example/loop", title="Event loop",
                      quote="Blocking calls stall every task that shares the loop.")
GIL = Evidence(url="https://docs.example/gil", title="GIL",
               quote="Only one thread executes Python bytecode at a time.")


def _plan(n: int = 3, intent: str = "describe") -> ResearchPlan:
    return ResearchPlan(topic="Python concurrency", brief="b", intent=intent,
                        targets=("threading", "asyncio") if intent == "compare" else (),
                        subquestions=tuple(SubQuestion(index=i, question=f"Question {i}?")
                                           for i in range(n)))


def _findings() -> list[Finding]:
    return [
        Finding(subquestion_index=0, subquestion="Question 0?", claims=(
            Claim(text="Pools start workers.", evidence=(POOL,)),
            Claim(text="Loops run in a thread.", evidence=(LOOP,)),
        )),
        Finding(subquestion_index=1, subquestion="Question 1?", claims=(
            Claim(text="Blocking stalls the loop.", evidence=(LOOP_OTHER, GIL),
                  confidence="conflict"),
        )),
        Finding(subquestion_index=2, subquestion="Question 2?", claims=()),
    ]


def _assemble(draft: ReportDraft, findings=None, plan=None, notice=None):
    return assemble(plan or _plan(), findings if findings is not None else _findings(), draft,
                    report_id="r_test", engine="test-engine", notice=notice)


def _section(markdown: str, heading: str) -> str:
    """The body under one `## heading`, up to the next `## `."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.S | re.M)
    assert match, f"no section {heading!r} in:\n{markdown}"
    return match.group(1).strip()


def _references(markdown: str) -> list[str]:
    return [line for line in _section(markdown, "References").splitlines() if line]


def test_evidence_catalog_keys_follow_findings_claims_evidence_order() -> None:
    keys = evidence_catalog(_findings())
    assert [k for k, _ in keys] == ["E1", "E2", "E3", "E4"]
    assert [e for _, e in keys] == [POOL, LOOP, LOOP_OTHER, GIL]


def test_one_heading_per_subquestion_even_without_claims_or_draft_section() -> None:
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Question 0?", "Pools start workers [E1]."),
        SectionDraft(2, "Question 2?", ""),  # finding with no claims
    ))  # no draft section at all for sub-question 1
    md = _assemble(draft).markdown
    assert [h for h in re.findall(r"^## (.+)$", md, re.M) if h.startswith("Question")] == [
        "Question 0?", "Question 1?", "Question 2?"]
    assert INSUFFICIENT not in _section(md, "Question 0?")
    assert _section(md, "Question 1?") == INSUFFICIENT
    assert _section(md, "Question 2?") == INSUFFICIENT


def test_uncited_prose_is_kept_and_marked_insufficient() -> None:
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Question 0?", "Pools are probably fast."),))
    md = _assemble(draft).markdown
    assert _section(md, "Question 0?") == f"Pools are probably fast. {INSUFFICIENT}"


def test_references_numbered_in_order_of_first_use_not_catalog_order() -> None:
    draft = ReportDraft(title="T", summary="Only one thread runs bytecode [E4].", sections=(
        SectionDraft(0, "Question 0?", "Loops run in one thread [E2]. Pools start workers [E1]."),
        SectionDraft(1, "Question 1?", "Bytecode again [E4]."),
    ))
    report = _assemble(draft)
    assert [(c.number, c.url, c.quote) for c in report.citations] == [
        (1, GIL.url, GIL.quote), (2, LOOP.url, LOOP.quote), (3, POOL.url, POOL.quote),
        (4, LOOP_OTHER.url, LOOP_OTHER.quote)]  # first used by "Disputed findings", last
    assert _section(report.markdown, "Executive summary") == "Only one thread runs bytecode [1]."
    assert _section(report.markdown, "Question 0?") == (
        "Loops run in one thread [2]. Pools start workers [3].")
    assert _section(report.markdown, "Question 1?") == "Bytecode again [1]."
    refs = _references(report.markdown)
    assert refs == [
        f"1. GIL ([docs.example]({GIL.url})) — “{GIL.quote}”",
        f"2. Event loop ([docs.example]({LOOP.url})) — “{LOOP.quote}”",
        f"3. Pools ([docs.example]({POOL.url})) — “{POOL.quote}”",
        f"4. Event loop ([docs.example]({LOOP_OTHER.url})) — “{LOOP_OTHER.quote}”",
    ]


def test_each_distinct_url_and_quote_is_listed_once() -> None:
    twin = Evidence(url=LOOP.url, title="Another title", quote=LOOP.quote)
    findings = [
        Finding(subquestion_index=0, subquestion="Question 0?", claims=(
            Claim(text="a", evidence=(LOOP,)), Claim(text="b", evidence=(LOOP_OTHER,)))),
        Finding(subquestion_index=1, subquestion="Question 1?", claims=(
            Claim(text="c", evidence=(twin,)),)),
    ]
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Question 0?", "Runs in a thread [E1]. Blocking stalls [E2]."),
        SectionDraft(1, "Question 1?", "Same sentence, other researcher [E3]. Both [E1, E3]."),
    ))
    report = _assemble(draft, findings=findings, plan=_plan(2))
    # Same url, different quote: two references. Same (url, quote): one, whatever the title.
    assert [(c.number, c.quote) for c in report.citations] == [(1, LOOP.quote),
                                                               (2, LOOP_OTHER.quote)]
    assert _section(report.markdown, "Question 1?") == (
        "Same sentence, other researcher [1]. Both [1].")
    assert len(_references(report.markdown)) == 2


def test_unknown_evidence_keys_are_flagged_not_rendered() -> None:
    draft = ReportDraft(title="T", summary="See also [E99].", sections=(
        SectionDraft(0, "Question 0?", "Pools start workers [E1, E42]."),
        SectionDraft(1, "Question 1?", "Made up [E7]."),
    ))
    report = _assemble(draft)
    assert "E99" not in report.markdown and "E42" not in report.markdown
    assert "[E" not in report.markdown.split("## References")[0]
    assert _section(report.markdown, "Question 0?") == "Pools start workers [1]."
    # A section whose only citation is unknown has no evidence.
    assert _section(report.markdown, "Question 1?") == f"Made up . {INSUFFICIENT}"
    assert "draft cited unknown evidence keys: E42, E7, E99" in report.flags
    assert [c.quote for c in report.citations][0] == POOL.quote


def test_number_absent_from_cited_quote_is_flagged_and_marked() -> None:
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Question 0?",
                     "The pool starts 4 workers [E1]. Since 3.12 it starts 40 workers [E1]. "
                     "A loop handles 10,000 sockets [E2]."),))
    report = _assemble(draft)
    body = _section(report.markdown, "Question 0?")
    # "4" is a different figure from the quote's "40"; "3.12" and "40" are in the quote.
    assert body == ("The pool starts 4 [number not in source] workers [1]. "
                    "Since 3.12 it starts 40 workers [1]. "
                    "A loop handles 10,000 [number not in source] sockets [2].")
    assert report.flags == (
        "Question 0?: the number 4 does not appear in its cited quote",
        "Question 0?: the number 10,000 does not appear in its cited quote",
    )


def test_number_check_uses_all_quotes_a_sentence_cites_and_ignores_citation_numbers() -> None:
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Question 0?",
                     "Version 3.12 starts 40 workers, and one thread runs at a time [E2][E1]."),
        SectionDraft(1, "Question 1?", "Uncited 7 is not checked. Cited 12 is [E3]."),
    ))
    report = _assemble(draft)
    assert "[number not in source]" not in _section(report.markdown, "Question 0?")
    assert _section(report.markdown, "Question 1?") == (
        "Uncited 7 is not checked. Cited 12 [number not in source] is [3].")
    assert report.flags == ("Question 1?: the number 12 does not appear in its cited quote",)


def test_number_marker_does_not_land_inside_a_longer_number() -> None:
    quote = Evidence(url="u", title="t", quote="It was added in Python 3.12 last year.")
    findings = [Finding(subquestion_index=0, subquestion="Q", claims=(
        Claim(text="x", evidence=(quote,)),))]
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Q", "Python 3.12 has 3 new modes [E1]."),))
    report = _assemble(draft, findings=findings, plan=_plan(1))
    assert "Python 3.12 has 3 [number not in source] new modes [1]." in report.markdown


def test_conflicting_claims_are_listed_under_disputed_findings() -> None:
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(1, "Question 1?", "Blocking stalls the loop [E3][E4]."),))
    md = _assemble(draft).markdown
    disputed = _section(md, "Disputed findings")
    assert disputed == "- *Question 1?*: Blocking stalls the loop. [1][2]"
    assert md.index("## Disputed findings") < md.index("## References")


def test_no_disputed_section_without_conflicts() -> None:
    findings = [Finding(subquestion_index=0, subquestion="Question 0?",
                        claims=(Claim(text="a", evidence=(POOL,), confidence="high"),))]
    draft = ReportDraft(title="T", summary="", sections=(SectionDraft(0, "Question 0?", "a [E1]."),))
    md = _assemble(draft, findings=findings, plan=_plan(1)).markdown
    assert "Disputed findings" not in md


def test_header_notice_topic_and_empty_references() -> None:
    draft = ReportDraft(title="Research report: X", summary="", sections=())
    report = _assemble(draft, findings=[], notice="Extractive offline report: no model wrote this.")
    lines = report.markdown.splitlines()
    assert lines[0] == "# Research report: X"
    assert lines[2] == "> Extractive offline report: no model wrote this."
    assert "**Topic:** Python concurrency" in report.markdown
    assert _section(report.markdown, "References") == INSUFFICIENT
    assert report.citations == () and report.engine == "test-engine"
    assert report.report_id == "r_test" and report.markdown.endswith("\n")


def test_paragraphs_and_list_items_keep_their_line_breaks() -> None:
    draft = ReportDraft(title="T", summary="", sections=(
        SectionDraft(0, "Question 0?", "- Pools start workers [E1].\n- Loops run [E2].\n\n"
                                        "A second paragraph [E1]."),))
    body = _section(_assemble(draft).markdown, "Question 0?")
    assert body == "- Pools start workers [1].\n- Loops run [2].\n\nA second paragraph [1]."


def test_comparison_table_only_for_compare_intent() -> None:
    table = "| Dimension | threading | asyncio |\n|---|---|---|\n| speed | x [E1] | y [E2] |"
    draft = ReportDraft(title="T", summary="", sections=(), comparison_table=table)
    compared = _assemble(draft, plan=_plan(intent="compare")).markdown
    assert "| speed | x [1] | y [2] |" in _section(compared, "Comparison")
    described = _assemble(draft, plan=_plan(intent="describe")).markdown
    assert "## Comparison" not in described


def test_same_inputs_give_identical_report_and_stable_report_id() -> None:
    draft = ReportDraft(title="T", summary="Sum 9 [E1].", sections=(
        SectionDraft(0, "Question 0?", "Has 4 and 5 and 6 workers [E1]."),))
    first, second = _assemble(draft), _assemble(draft)
    assert first == second
    assert report_id_for("b1", "t1") == report_id_for("b1", "t1") != report_id_for("b2", "t1")
    assert report_id_for("b1", "t1").startswith("r_")
