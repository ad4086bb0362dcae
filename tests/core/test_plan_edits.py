"""The reviewer's answer and the plan it makes (core.topics.plan_edits): no Prefect involved."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.models import ResearchPlan, SubQuestion
from core.topics.plan_edits import MAX_REVIEWED, PlanEdit, PlanRejected, edit_of, reviewed

PLAN = ResearchPlan(topic="Threads or asyncio?", brief="b", intent="compare",
                    targets=("threads", "asyncio"), language="en", subquestions=(
                        SubQuestion(index=0, question="How do threads and asyncio wait?",
                                    queries=("threads asyncio waiting",),
                                    focus=("threads", "asyncio")),
                        SubQuestion(index=1, question="How do they share memory?",
                                    queries=("threads asyncio memory", "shared state"),
                                    focus=("threads", "asyncio"))))


def test_the_plan_as_first_shown_gives_the_same_plan_back() -> None:
    assert reviewed(PLAN, edit_of(PLAN)) == PLAN


def test_kept_ones_stay_as_planned_and_edited_or_added_ones_are_asked_as_written() -> None:
    edit = PlanEdit.model_validate({"subquestions": [
        {"question": "How do they share memory?",
         "searches": ["threads asyncio memory", "shared state"]},  # kept, moved up
        {"question": "  How do threads and asyncio   wait?  ",
         "searches": ["event loop waiting"]},  # same text, new searches: edited
        {"question": "What does a lock protect?"}]})  # added, no searches
    plan = reviewed(PLAN, edit)
    kept, edited, added = plan.subquestions
    assert kept == PLAN.subquestions[1].model_copy(update={"index": 0})
    assert (edited.index, edited.question, edited.queries, edited.focus) == (
        1, "How do threads and asyncio wait?", ("event loop waiting",), ())
    assert (added.index, added.queries, added.language) == (
        2, ("What does a lock protect?",), "en")
    assert plan.intent == "compare" and plan.targets == PLAN.targets


@pytest.mark.parametrize("answer, why", [
    ({"approve": False}, "not approved"),
    ({"approve": True, "subquestions": []}, "no sub-question"),
])
def test_nothing_to_research_cancels(answer: dict, why: str) -> None:
    edit = PlanEdit.model_validate({"subquestions": edit_of(PLAN).model_dump()["subquestions"],
                                    **answer})
    with pytest.raises(PlanRejected, match=why):
        reviewed(PLAN, edit)


@pytest.mark.parametrize("answer", [
    {"subquestions": [{"question": "ab"}]},  # too short
    {"subquestions": [{"question": "x" * 501}]},
    {"subquestions": [{"question": f"Question {i}?"} for i in range(MAX_REVIEWED + 1)]},
    {"subquestions": [{"question": "Fine question?", "searches": ["s"] * 6}]},
    {"subquestions": [{"question": "Fine question?", "focus": ["x"]}]},  # not the reviewer's
    {"approve": True, "batch_id": "other"},
])
def test_an_answer_out_of_bounds_is_refused(answer: dict) -> None:
    with pytest.raises(ValidationError):
        PlanEdit.model_validate(answer)


def test_blank_searches_are_dropped() -> None:
    edit = PlanEdit.model_validate({"subquestions": [{"question": "Why?  ok",
                                                      "searches": ["  ", "a\n b"]}]})
    assert edit.subquestions[0].searches == ["a b"]
    assert reviewed(PLAN, edit).subquestions[0].queries == ("a b",)


def test_review_options_are_csv_columns(tmp_path) -> None:
    from core.topics.rows import read_topics_csv

    csv = tmp_path / "t.csv"
    csv.write_text("topic,review_plan,review_timeout,review_on_timeout\n"
                   "Threads or asyncio?,true,120,proceed\n"
                   "What is a GIL?,,,\n"
                   "What is a lock?,maybe,,\n"
                   "What is a queue?,yes,5,\n"
                   "What is a pipe?,1,,later\n", encoding="utf-8")
    good, bad = read_topics_csv(csv, batch_id="b")
    reviewed_row, plain_row = (r.topic for r in good)
    assert (reviewed_row.review_plan, reviewed_row.review_timeout,
            reviewed_row.review_on_timeout) == (True, 120, "proceed")
    assert (plain_row.review_plan, plain_row.review_timeout,
            plain_row.review_on_timeout) == (False, 3600, "cancel")
    assert [(e.row, e.message.split(":")[0]) for e in bad] == [
        (4, "review_plan"), (5, "review_timeout"), (6, "review_on_timeout")]
