"""Reading a model's answers: JSON out of prose or code fences, validated into the role's schema;
the plan rules a re-ask enforces; a markdown report split back into the plan's parts.

Nothing here calls a model: `core.engine.model_driven.llm_engine` asks, these functions read what came back and say
precisely what was wrong, so a re-ask can quote it.
"""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from core.engine.model_driven import prompts
from core.models import ReportDraft, SectionDraft
from core.engine.model_driven.schemas import PlanOut
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


_LOOPING = re.compile(r"(\S{2,}?\s*)\1{3,}")  # "asyncio asyncio asyncio asyncio", "模式模式模式模式"


def distinct_subquestions(plan: PlanOut) -> PlanOut:
    """The plan with each sub-question once: a weak model may write one question three times
    (compared case-, space- and punctuation-insensitively), or loop inside one ("What is the
    asyncio asyncio asyncio ..."), which is no question."""
    seen: set[str] = set()
    kept = []
    for sq in plan.subquestions:
        key = " ".join(re.sub(r"[^\w\s]", " ", sq.question.lower()).split())
        if key and key not in seen and not _LOOPING.search(key):
            seen.add(key)
            kept.append(sq)
    return plan if len(kept) == len(plan.subquestions) else plan.model_copy(
        update={"subquestions": kept})


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


_TAGGED = re.compile(r"^\[\s*(summary|comparison|recommendation|conclusion|S\s*\d+)\s*\]\s*(.*)$",
                     re.IGNORECASE)
# Untagged headings a model may still write for the parts around the sections.
_PART_WORDS = {"summary": ("executive summary", "summary", "overview", "摘要", "概要", "概述"),
               "comparison": ("comparison", "对比", "比较"),
               "recommendation": ("recommendation", "建议", "推荐"),
               "conclusion": ("conclusion", "结论", "总结", "结语")}


def _part_of(heading: str) -> tuple[str | None, str]:
    """(part, heading without its tag): part is summary | comparison | recommendation |
    conclusion | S<n>, or None for a heading without a tag that names no part."""
    tagged = _TAGGED.match(heading)
    if tagged:
        tag = tagged.group(1).replace(" ", "")
        return (tag.upper() if tag[0] in "sS" and tag[1:].isdigit() else tag.lower(),
                tagged.group(2).strip())
    # Untagged, a part is named by a short heading that starts with its word ("Conclusion",
    # "Summary of findings"); "Overview of fox weight" is a section about fox weight.
    lowered = heading.strip().lower().strip("#*: ")
    short = len(lowered.split()) <= 3
    part = next((p for p, words in _PART_WORDS.items()
                 if short and any(lowered.startswith(w) for w in words)), None)
    return part, heading.strip()


def split_markdown(text: str) -> tuple[str, list[tuple[str | None, str, str]]]:
    """A report in markdown as (title, [(part, heading, body)]), in the order written."""
    title, parts = "", []
    current: list[str] | None = None
    for line in strip_fence(text).strip().splitlines():
        if line.startswith("# ") and not title and current is None:
            title = line[2:].strip()
            continue
        if line.startswith("## "):
            part, heading = _part_of(line[3:])
            current = []
            parts.append((part, heading, current))
            continue
        if current is not None:
            current.append(line)
    return title, [(p, h, "\n".join(body).strip()) for p, h, body in parts]


def draft_from_markdown(plan: ResearchPlan, text: str) -> ReportDraft:
    """The writer's markdown as a draft: tagged headings ([S2], [summary], ...) say which part
    each is; untagged sections fill the plan's remaining sections in order."""
    title, parts = split_markdown(text)
    if not parts:
        raise InvalidOutput("no '## ' sections found")
    order = [sq.index for sq in plan.sections]
    sections: dict[int, SectionDraft] = {}
    around: dict[str, tuple[str, str]] = {}
    loose: list[tuple[str, str]] = []
    for part, heading, body in parts:
        if part and part.startswith("S"):
            index = int(part[1:]) - 1
            if index in order and index not in sections:
                sections[index] = SectionDraft(index, heading or plan.subquestions[index].question,
                                               body)
                continue
            loose.append((heading, body))
        elif part and part not in around:
            around[part] = (heading, body)
        else:
            loose.append((heading, body))
    for (heading, body), index in zip(loose, [i for i in order if i not in sections]):
        sections[index] = SectionDraft(index, heading, body)
    if not sections and "summary" not in around:
        raise InvalidOutput("no section of the outline was found (headings need their [tags])")
    table = around.get("comparison", ("", ""))[1] if plan.intent == "compare" else ""
    recommendation = around.get("recommendation", ("", ""))[1] if plan.intent == "recommend" else ""
    return ReportDraft(
        title=title or plan.topic, summary=around.get("summary", ("", ""))[1],
        sections=tuple(sections[i] for i in order if i in sections),
        comparison_table=strip_fence(table).strip() or None,
        recommendation=recommendation or None, conclusion=around.get("conclusion", ("", ""))[1],
        headings=tuple((p, h) for p, (h, _) in around.items() if h))
