"""A plan as a person reviews it, and the plan their answer makes.

`PlanEdit` is what a reviewer sees and sends back: the sub-questions (each with the searches it
starts from) and whether to go on. `reviewed(plan, edit)` turns the answer into the plan that is
researched: a sub-question kept as it was stays the planned one (its focus, language and
searches; only its number follows its new place); an edited or added one is asked with the
searches given, or with its own text when none are. Dropping every sub-question, or not approving, cancels the topic.

The reviewer's text is untrusted like a topic: bounded here, escaped wherever it is shown.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.models import ResearchPlan, SubQuestion
from core.text.escaping import printable

MAX_REVIEWED = 10  # sub-questions a reviewer may leave in a plan (the planner asks at most 6)


class PlannedQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=3, max_length=500, description="The sub-question.")
    searches: list[str] = Field(default_factory=list, max_length=5, description=(
        "The searches its research starts from; none: the question itself."))

    @field_validator("question")
    @classmethod
    def _one_line(cls, v: str) -> str:
        # What a reviewer typed at the prompt: no control character or escape sequence stays.
        return " ".join(printable(v).split())

    @field_validator("searches")
    @classmethod
    def _searches(cls, v: list[str]) -> list[str]:
        kept = [" ".join(printable(s).split())[:300] for s in v]
        return [s for s in kept if s]


class PlanEdit(BaseModel):
    """The reviewer's answer: the sub-questions to research, and whether to research them."""

    model_config = ConfigDict(extra="forbid")

    approve: bool = Field(default=True, title="Approve", description=(
        "Research these sub-questions. Untick to cancel the topic."))
    subquestions: list[PlannedQuestion] = Field(default_factory=list, max_length=MAX_REVIEWED,
                                                title="Sub-questions", description=(
        "Edit, remove or add sub-questions; each is researched on its own."))


class PlanRejected(Exception):
    """The reviewer did not approve the plan (or left no sub-question in it)."""


def edit_of(plan: ResearchPlan) -> PlanEdit:
    """The plan as the reviewer first sees it."""
    return PlanEdit(subquestions=[PlannedQuestion(question=sq.question, searches=list(sq.queries))
                                  for sq in plan.subquestions])


def reviewed(plan: ResearchPlan, edit: PlanEdit) -> ResearchPlan:
    """The plan to research after `edit`. Raises PlanRejected when there is nothing to research."""
    if not edit.approve:
        raise PlanRejected("the plan was not approved")
    if not edit.subquestions:
        raise PlanRejected("the review left no sub-question to research")
    planned = {(sq.question, tuple(sq.queries)): sq for sq in plan.subquestions}
    subquestions = []
    for i, item in enumerate(edit.subquestions):
        queries = tuple(item.searches) or (item.question,)
        same = planned.get((item.question, queries))
        if same is not None:
            subquestions.append(same.model_copy(update={"index": i}))
        else:
            # No focus: the planner's reading of what its own questions are about would pull
            # the reviewer's question back towards them; the question says what it asks.
            subquestions.append(SubQuestion(index=i, question=item.question, queries=queries,
                                            language=plan.language))
    return plan.model_copy(update={"subquestions": tuple(subquestions)})


def summary(plan: ResearchPlan) -> list[str]:
    """The plan as lines to show a reviewer: each sub-question and its searches."""
    lines = []
    for sq in plan.subquestions:
        lines.append(f"{sq.index + 1}. {sq.question}")
        lines += [f"     search: {q}" for q in sq.queries]
    return lines
