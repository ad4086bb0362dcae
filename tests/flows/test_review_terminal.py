"""The plan's review at the terminal (flows.review_terminal): what is typed becomes the answer.

The round trip through a paused run is tests/flows/test_plan_review.py; here only the prompt.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from core.topics.plan_edits import PlanEdit, PlannedQuestion
from flows.review_terminal import TerminalReview

PLAN = PlanEdit(subquestions=[PlannedQuestion(question="How do threads wait?",
                                              searches=["threads waiting"]),
                              PlannedQuestion(question="How do [red]they[/] share memory?")])


def ask_with(*typed: str):
    lines = iter(typed)

    def ask(prompt: str) -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    return ask


def review(*typed: str, on_timeout: str = "cancel") -> tuple[PlanEdit, str]:
    screen = io.StringIO()
    terminal = TerminalReview(Console(file=screen, width=200), ask=ask_with(*typed))
    return terminal.answer("Threads?", PLAN, on_timeout, 60), screen.getvalue()


def test_edit_drop_and_add_at_the_prompt() -> None:
    answer, shown = review("e 1", "Why does the GIL serialise threads?", "gil; bytecode",
                           "d 2", "a", "What does a lock protect?", "", "y")
    assert answer.approve
    assert [(q.question, q.searches) for q in answer.subquestions] == [
        ("Why does the GIL serialise threads?", ["gil", "bytecode"]),
        ("What does a lock protect?", [])]
    assert "How do [red]they[/] share memory?" in shown  # shown as typed, not as markup


def test_an_empty_edit_keeps_what_was_there_and_bad_commands_are_said() -> None:
    answer, shown = review("e 9", "e 1", "", "", "x", "y")
    assert "not taken: no sub-question 9" in shown and "e N: edit" in shown
    assert answer.subquestions == PLAN.subquestions
    answer, _ = review("e 1", "", "-", "y")  # '-': search for the question itself
    assert answer.subquestions[0] == PlannedQuestion(question="How do threads wait?")


def test_no_at_the_prompt_cancels_and_nothing_left_is_not_approval() -> None:
    answer, _ = review("n")
    assert not answer.approve
    answer, shown = review("d 1", "d 1", "y", "n")
    assert "no sub-question left" in shown and not answer.approve


@pytest.mark.parametrize("on_timeout, approve", [("proceed", True), ("cancel", False)])
def test_end_of_input_does_what_the_timeout_would(on_timeout: str, approve: bool) -> None:
    answer, shown = review("d 1", on_timeout=on_timeout)  # then stdin ends
    assert answer.approve is approve and answer.subquestions == PLAN.subquestions
    assert "no answer" in shown
