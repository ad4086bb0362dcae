"""The supervisor's waves (core/topics/waves.py) and the plan's follow-ups
(ResearchPlan.with_followups).

Plain data in, plain data out: what a wave leaves open, the findings regrouped into the report's
sections, how many follow-ups a spending cap affords, and how follow-ups join the plan.
"""

from __future__ import annotations

from typing import Sequence

import pytest

from core.models import (Claim, Confidence, Evidence, Finding, FollowUp, ResearchPlan,
                         SubQuestion)
from core.topics.waves import affordable_followups, for_report, gaps


def ev(n: int) -> Evidence:
    return Evidence(url=f"https://p{n}.example", title=f"P{n}", quote=f"Quote number {n}.")


def claim(text: str, quotes: Sequence[int] = (), confidence: Confidence = "medium") -> Claim:
    return Claim(text=text, evidence=tuple(ev(n) for n in quotes), confidence=confidence)


def finding(index: int, *claims: Claim, notes: str = "") -> Finding:
    return Finding(subquestion_index=index, subquestion=f"Question {index + 1}?",
                   claims=tuple(claims), raw_notes=notes)


def plan_of(*subquestions: SubQuestion, language: str = "en") -> ResearchPlan:
    return ResearchPlan(topic="Foxes", brief="All about foxes.", subquestions=subquestions,
                        language=language)


def sq(index: int, parent: int | None = None, wave: int = 1) -> SubQuestion:
    return SubQuestion(index=index, question=f"Question {index + 1}?", parent=parent, wave=wave)


THREE = plan_of(sq(0), sq(1), sq(2))


# -- gaps -------------------------------------------------------------------------------------

def test_gaps_name_a_section_without_evidence_one_on_a_single_quote_and_a_conflict() -> None:
    findings = [finding(0, claim("Foxes weigh 12 kg.", [1, 2]),
                        claim("Foxes live 3 or 14 years.", [3, 4], "conflict")),
                finding(1, claim("Foxes are fast.", [5]))]  # sub-question 3: nothing at all
    found = gaps(THREE, findings)

    assert len(found) == 3
    conflict = next(g for g in found if "disagree" in g)
    assert "Sub-question 1" in conflict and "Foxes live 3 or 14 years." in conflict
    single = next(g for g in found if "single quote" in g)
    assert "Sub-question 2" in single and "Question 2?" in single
    empty = next(g for g in found if "no quoted evidence" in g)
    assert "Sub-question 3" in empty
    assert not any("Sub-question 1" in g and "single" in g for g in found)  # two quotes: fine


def test_claims_without_quotes_count_as_no_evidence() -> None:
    found = gaps(plan_of(sq(0)), [finding(0, claim("Foxes are red."))])
    assert len(found) == 1 and "no quoted evidence" in found[0]


def test_a_followup_filling_its_parents_gap_closes_it() -> None:
    plan = plan_of(sq(0), sq(1), sq(2, parent=1, wave=2))
    wave1 = [finding(0, claim("A", [1, 2])), finding(1)]
    assert any("Sub-question 2" in g for g in gaps(plan, wave1))

    filled = [*wave1, finding(2, claim("B", [3, 4]))]
    assert gaps(plan, filled) == []


def test_a_followup_is_not_a_gap_of_its_own_only_its_section_is() -> None:
    plan = plan_of(sq(0), sq(1, parent=0, wave=2))
    found = gaps(plan, [finding(0, claim("A", [1]))])  # the follow-up found nothing
    assert len(found) == 1
    assert "Sub-question 1" in found[0] and "single quote" in found[0]


# -- for_report -------------------------------------------------------------------------------

def test_followup_claims_join_their_parent_section_after_its_own() -> None:
    plan = plan_of(sq(0), sq(1), sq(2, parent=0, wave=2), sq(3, parent=0, wave=3))
    findings = [finding(3, claim("from wave 3", [4]), notes="notes 3"),
                finding(1, claim("second section", [2])),
                finding(2, claim("from wave 2", [3]), notes="notes 2"),
                finding(0, claim("own claim", [1]), notes="notes 0")]
    merged = for_report(plan, findings)

    assert [f.subquestion_index for f in merged] == [0, 1]
    assert [c.text for c in merged[0].claims] == ["own claim", "from wave 2", "from wave 3"]
    assert merged[0].subquestion == "Question 1?"
    assert merged[0].raw_notes == "notes 0\n\nnotes 2\n\nnotes 3"
    assert [c.text for c in merged[1].claims] == ["second section"]


def test_a_followup_fills_a_section_that_had_no_finding_of_its_own() -> None:
    plan = plan_of(sq(0), sq(1), sq(2, parent=1, wave=2))
    merged = for_report(plan, [finding(0, claim("A", [1])), finding(2, claim("B", [2]))])
    assert [(f.subquestion_index, [c.text for c in f.claims]) for f in merged] == [
        (0, ["A"]), (1, ["B"])]


def test_a_parentless_followup_is_a_section_of_its_own() -> None:
    plan = plan_of(sq(0), sq(1), sq(2, wave=2))
    merged = for_report(plan, [finding(2, claim("new part", [3])), finding(0, claim("A", [1])),
                               finding(1, claim("B", [2]))])
    assert [f.subquestion_index for f in merged] == [0, 1, 2]  # plan order, not arrival order
    assert [c.text for c in merged[2].claims] == ["new part"]


def test_sections_without_any_finding_are_left_out() -> None:
    assert [f.subquestion_index for f in for_report(THREE, [finding(2, claim("C", [1]))])] == [2]


# -- affordable_followups ---------------------------------------------------------------------

def test_without_a_cap_every_followup_is_affordable() -> None:
    assert affordable_followups(3, spent=100.0, cap=None, researched=4) == 3


def test_before_anything_is_spent_every_followup_is_affordable() -> None:
    assert affordable_followups(3, spent=0.0, cap=1.0, researched=0) == 3
    assert affordable_followups(3, spent=0.0, cap=1.0, researched=4) == 3


def test_the_cap_leaves_room_for_some_followups() -> None:
    # 4 sub-questions cost 0.5: 0.125 each; one stays in reserve for the report, so
    # 1.0 - 0.5 - 0.125 = 0.375 leaves room for exactly 3, and 0.3125 for 2.
    assert affordable_followups(5, spent=0.5, cap=1.0, researched=4) == 3
    assert affordable_followups(5, spent=0.5, cap=0.9375, researched=4) == 2
    assert affordable_followups(1, spent=0.5, cap=1.0, researched=4) == 1  # never above wanted


@pytest.mark.parametrize("cap", [0.625, 0.6, 0.5, 0.4])
def test_nothing_is_affordable_once_the_reserve_is_reached(cap: float) -> None:
    assert affordable_followups(3, spent=0.5, cap=cap, researched=4) == 0


# -- ResearchPlan.with_followups --------------------------------------------------------------

def test_followups_continue_the_indexes_and_carry_their_wave_and_language() -> None:
    plan = plan_of(sq(0), sq(1), language="zh")
    grown = plan.with_followups([FollowUp(question="Q3?", queries=("q3",), why="thin", parent=1),
                                 FollowUp(question="Q4?", why="new part")], wave=2)

    added = grown.subquestions[2:]
    assert [s.index for s in added] == [2, 3]
    assert [s.wave for s in added] == [2, 2]
    assert [s.language for s in added] == ["zh", "zh"]
    assert [s.parent for s in added] == [1, None]
    assert added[0].why == "thin" and added[0].queries == ("q3",)
    assert added[1].queries == ("Q4?",)  # no queries: the question is searched
    assert grown.subquestions[:2] == plan.subquestions and len(plan.subquestions) == 2


def test_a_followup_of_a_followup_completes_the_root_section() -> None:
    wave2 = plan_of(sq(0), sq(1)).with_followups([FollowUp(question="Q3?", parent=0)], wave=2)
    wave3 = wave2.with_followups([FollowUp(question="Q4?", parent=2)], wave=3)
    assert wave3.subquestions[3].parent == 0
    assert wave3.subquestions[3].wave == 3


def test_a_followup_of_a_new_part_completes_that_part() -> None:
    wave2 = plan_of(sq(0)).with_followups([FollowUp(question="Q2?")], wave=2)
    wave3 = wave2.with_followups([FollowUp(question="Q3?", parent=1)], wave=3)
    assert wave3.subquestions[2].parent == 1


@pytest.mark.parametrize("parent", [7, -1])
def test_an_unknown_parent_opens_a_new_section(parent: int) -> None:
    grown = plan_of(sq(0)).with_followups([FollowUp(question="Q2?", parent=parent)], wave=2)
    assert grown.subquestions[1].parent is None
    assert [s.index for s in grown.sections] == [0, 1]


def test_sections_leave_out_followups_that_complete_a_section() -> None:
    grown = plan_of(sq(0), sq(1)).with_followups(
        [FollowUp(question="Q3?", parent=0), FollowUp(question="Q4?"),
         FollowUp(question="Q5?", parent=1)], wave=2)
    assert [s.index for s in grown.sections] == [0, 1, 3]
    assert len(grown.subquestions) == 5
