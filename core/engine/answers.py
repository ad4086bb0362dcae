"""Reading a model's answers: JSON out of prose or code fences, validated into the role's schema;
the plan rules a re-ask enforces; a report draft mapped back onto the plan's sub-questions.

Nothing here calls a model: `core.engine.llm` asks, these functions read what came back and say
precisely what was wrong, so a re-ask can quote it.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from core.engine import prompts
from core.engine.base import ReportDraft, SectionDraft
from core.engine.schemas import DraftOut, PlanOut
from core.models import ResearchPlan

Out = TypeVar("Out", bound=BaseModel)
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class InvalidOutput(ValueError):
    """The model's answer did not parse into the requested shape."""


def strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text


def parse_answer(text: str, shape: type[Out]) -> Out:
    """The first JSON object in `text` (fences and surrounding prose tolerated) as `shape`."""
    body = strip_fence(text).strip()
    start = body.find("{")
    if start < 0:
        raise InvalidOutput("no JSON object in the answer")
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"invalid JSON: {exc.msg} at position {exc.pos}") from exc
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise InvalidOutput(problems) from exc


def plan_complaint(plan: PlanOut, low: int) -> str | None:
    if len(plan.subquestions) < low:
        return prompts.complaint_too_few_subquestions(low, len(plan.subquestions))
    if plan.intent != "compare":
        return None
    if len(plan.targets) < 2:
        return prompts.complaint_too_few_targets()
    # A dimension names all targets (or none, "How do they differ in cost?"); naming exactly
    # one is the per-option pattern the report cannot compare from.
    offenders = [sq.question for sq in plan.subquestions
                 if sum(t.lower() in sq.question.lower() for t in plan.targets) == 1]
    return prompts.complaint_one_target_each(plan.targets, offenders) if offenders else None




def draft_from(plan: ResearchPlan, out: DraftOut) -> ReportDraft:
    indexes = [sq.index for sq in plan.subquestions]
    returned = [s.subquestion_index for s in out.sections]
    # The prompt numbers sub-questions from 1; a model that numbered from 0 (or ignored the
    # numbers but wrote one section per sub-question in order) is mapped back too.
    if all(r - 1 in indexes for r in returned):
        mapped = [r - 1 for r in returned]
    elif all(r in indexes for r in returned):
        mapped = returned
    elif len(returned) == len(indexes):
        mapped = indexes
    else:
        mapped = returned
    sections = [s.model_copy(update={"subquestion_index": i}) for s, i in zip(out.sections, mapped)]
    drafted: dict[int, SectionDraft] = {}
    for s in sections:
        if s.subquestion_index in indexes and s.subquestion_index not in drafted:
            drafted[s.subquestion_index] = SectionDraft(
                subquestion_index=s.subquestion_index, heading=s.heading.strip(),
                body=s.body.strip())
    table = (out.comparison_table or "").strip() if plan.intent == "compare" else ""
    return ReportDraft(title=out.title.strip(), summary=out.summary.strip(),
                       sections=tuple(drafted[i] for i in indexes if i in drafted),
                       comparison_table=strip_fence(table).strip() or None)
