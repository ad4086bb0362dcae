"""A plan, whichever engine drew it, tied to the topic's parts as code read them: the gate then
judges a model's plan by the same parts as the offline planner's.

    with_parts(plan, reading) -> ResearchPlan

Each sub-question is tied to the part it answers: for a comparison, the option it alone names,
or how they differ when it names several; else the part closest to it in meaning (one part:
that one). A sub-question the planner left without a subject gets its part's keys as `focus`.
A plan that already has its parts (the offline planner's) is returned as it is.
"""

from __future__ import annotations

from core.text.embedding import Embedder, EmbeddingUnavailable, embedder as shared_embedder
from core.models import ResearchPlan, SubQuestion
from core.relevance.about import names
from core.relevance.subject import Reading


def with_parts(plan: ResearchPlan, reading: Reading,
               embedder: Embedder | None = None) -> ResearchPlan:
    if plan.parts or not reading.parts:
        return plan
    parts = reading.parts
    closest = _closest(plan.subquestions, [p.heading for p in parts], embedder)
    tied: list[SubQuestion] = []
    for sq, near in zip(plan.subquestions, closest):
        part = near
        if reading.options:
            named = [i for i, p in enumerate(parts) if p.kind == "option"
                     and names(sq.question, p.about)]
            differ = next((i for i, p in enumerate(parts) if p.kind == "differ"), near)
            part = named[0] if len(named) == 1 else differ if len(named) > 1 else near
        tied.append(sq.model_copy(update={"part": part,
                                          "focus": sq.focus or parts[part].about}))
    return plan.model_copy(update={"parts": parts, "aspects": reading.aspects,
                                   "subquestions": tuple(tied)})


def _closest(subquestions: tuple[SubQuestion, ...], headings: list[str],
             embedder: Embedder | None) -> list[int]:
    if len(headings) == 1 or not subquestions:
        return [0] * len(subquestions)
    try:
        vectors = (embedder or shared_embedder()).embed(
            [*headings, *(sq.question for sq in subquestions)])
    except EmbeddingUnavailable:
        return [min(i, len(headings) - 1) for i in range(len(subquestions))]
    parts, asked = vectors[:len(headings)], vectors[len(headings):]
    return [int((parts @ v).argmax()) for v in asked]
