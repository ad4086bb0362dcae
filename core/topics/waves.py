"""The supervisor's waves of research: what a wave leaves open, how many follow-ups the budget
allows, and the findings regrouped into the report's sections.

After the plan's sub-questions are researched (wave 1), the supervisor (an engine's `review`)
reads the findings with the gaps found here in code, and may ask follow-up sub-questions,
researched as the next wave. A follow-up either completes a section of the plan (`parent`) or
opens a new one. Nothing here calls a model or Prefect.
"""

from __future__ import annotations

import math
from typing import Sequence

from core.models import Claim, Finding, ResearchPlan

MAX_FOLLOWUPS = 3  # per wave: a wave is a few targeted questions, not a second plan


def gaps(plan: ResearchPlan, findings: Sequence[Finding]) -> list[str]:
    """What the findings so far leave open, section by section, as lines for the supervisor:
    sections without quoted evidence, sections resting on one quote, disputed claims."""
    merged = {f.subquestion_index: f for f in for_report(plan, findings)}
    out: list[str] = []
    for sq in plan.sections:
        finding = merged.get(sq.index)
        quotes = finding.support if finding else 0
        label = f"Sub-question {sq.index + 1} ({sq.question})"
        if not quotes:
            out.append(f"{label}: no quoted evidence; its section would read "
                       "[insufficient evidence]")
        elif quotes == 1:
            out.append(f"{label}: rests on a single quote")
        for claim in finding.claims if finding else ():
            if claim.confidence == "conflict":
                out.append(f"{label}: sources disagree: {claim.text}")
    return out


def for_report(plan: ResearchPlan, findings: Sequence[Finding]) -> list[Finding]:
    """One finding per section of the plan, in plan order: a follow-up's claims join the
    section it completes (after the section's own), so the report reads as the plan does."""
    by_index = {f.subquestion_index: f for f in findings}
    out: list[Finding] = []
    for sq in plan.sections:
        own = by_index.get(sq.index)
        extra: list[Claim] = [c for f in plan.subquestions if f.parent == sq.index
                              and f.index in by_index for c in by_index[f.index].claims]
        if own is None and not extra:
            continue
        claims = (own.claims if own else ()) + tuple(extra)
        notes = "\n\n".join(by_index[i].raw_notes for i in
                            [sq.index, *(f.index for f in plan.subquestions if f.parent == sq.index)]
                            if i in by_index and by_index[i].raw_notes)
        out.append(Finding(subquestion_index=sq.index, subquestion=sq.question, claims=claims,
                           raw_notes=notes))
    return out


def affordable_followups(wanted: int, *, spent: float, cap: float | None,
                         researched: int) -> int:
    """How many of `wanted` follow-ups the spending cap leaves room for.

    A follow-up is expected to cost what an average sub-question has cost so far (spend /
    sub-questions researched); the report is still to be written, so one sub-question's worth
    stays in reserve. Without a cap, or before anything was spent, all of them.
    """
    if cap is None or spent <= 0 or researched <= 0:
        return wanted
    each = spent / researched
    room = cap - spent - each
    # The epsilon keeps binary rounding (0.7 - 0.2 - 0.1 = 0.3999...) from losing one.
    return max(0, min(wanted, math.floor(room / each + 1e-9))) if room > 0 else 0
