"""The executive summary of an extractive report: one quoted claim per section, chosen for
coverage rather than position.

Per section, the claim most central to it (closest in meaning to the section's question and to
its other claims) is picked, MMR-style: a candidate that repeats a line already in the summary
is penalised, a near-copy is skipped, and one naming a compared option the summary has not
named yet, or quoting the subject's own page, is preferred. Claims that do not name the subject (a focus phrase or
compared option of the plan) are not summary material: on their own they read as fragments
("A string used for identification purposes only.") or lean on a missing antecedent ("It ...").
Quotes are never edited; the summary is made of the same claims the sections cite.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from core.text.embedding import Embedder, embedder as shared_embedder
from core.relevance.about import naming
from core.engine.sentences import overlap, terms
from core.models import Claim, ResearchPlan

# How much repeating an earlier summary line costs a candidate (MMR's trade-off).
REDUNDANCY = 0.6
_DUPLICATE_COSINE, _DUPLICATE_OVERLAP = 0.92, 0.5
# What naming a compared option the summary has not named yet is worth: a comparison's summary
# should speak of every option, not three times of the one with the most pages.
NEW_OPTION = 0.1
# What a claim from the subject's own page is worth (a page whose title names the subject): its
# definition opens a summary better than a neighbour's sentence that mentions it in passing.
HOME = 0.15
# Sentences that open on a pronoun or a connective ("For example", "However", 相似地) refer back
# to something the summary does not show.
_ANAPHOR = re.compile(r"^(?:it|its|this|these|those|they|their|such|here|there|also|however|"
                      r"similarly|likewise|for (?:example|instance)|in addition|moreover|"
                      r"furthermore|otherwise|instead(?! of)|therefore|thus|hence)\b|^[它这此其该]|"
                      r"^(?:相似地|同样|另外|此外|但是|然而|因此|所以|例如|比如)", re.I)


# An API reference's verbless definition: "A boolean value indicating whether ...".
_DEFINITION = re.compile(r"^an?\s+(?:[\w-]+\s+){0,3}(?:used|indicating|representing|containing|"
                         r"describing|specifying|denoting)\b", re.I)


def summarize(plan: ResearchPlan, sections: Sequence[tuple[str, Sequence[Claim]]],
              embedder: Embedder | None = None, limit: int = 5) -> list[Claim]:
    """At most one claim per section (question, its claims), in section order, at most
    `limit` in all; sections with no claim fit for a summary are left out."""
    subject = [terms(p) for p in (*plan.targets, *(f for sq in plan.subquestions
                                                   for f in sq.focus)) if terms(p)]
    pools = [(question, [c for c in claims if _fit(c.text, subject)])
             for question, claims in sections]
    texts = [t for question, claims in pools for t in (question, *(c.text for c in claims))]
    if not any(claims for _, claims in pools):
        return []
    vectors = (embedder or shared_embedder()).embed(texts)  # one batch for the whole report
    picked: list[tuple[int, Claim, np.ndarray]] = []
    unnamed = [terms(t) for t in plan.targets if terms(t)]
    row = 0
    for index, (question, claims) in enumerate(pools):
        q, vecs = vectors[row], vectors[row + 1: row + 1 + len(claims)]
        row += 1 + len(claims)
        if not claims or len(picked) == limit:
            continue
        best: tuple[float, int] | None = None
        for i, claim in enumerate(claims):
            if any(float(vecs[i] @ v) >= _DUPLICATE_COSINE
                   or overlap(claim.text, c.text) > _DUPLICATE_OVERLAP for _, c, v in picked):
                continue
            value = _centrality(i, vecs, q) - REDUNDANCY * max(
                (float(vecs[i] @ v) for _, _, v in picked), default=0.0)
            if any(naming([o], terms(claim.text)) >= 1.0 for o in unnamed):
                value += NEW_OPTION  # a compared option the summary has not named yet
            if _home(claim, subject):
                value += HOME
            if best is None or value > best[0] + 1e-9:  # ties: the section's earlier claim
                best = (value, i)
        if best is not None:
            picked.append((index, claims[best[1]], vecs[best[1]]))
            said = terms(claims[best[1]].text)
            unnamed = [o for o in unnamed if naming([o], said) < 1.0]
    return [claim for _, claim, _ in picked]


def _centrality(i: int, vecs: np.ndarray, question: np.ndarray) -> float:
    """Mean of closeness to the section's question and to its other claims."""
    to_question = float(vecs[i] @ question)
    if len(vecs) < 2:
        return to_question
    others = (float((vecs @ vecs[i]).sum()) - float(vecs[i] @ vecs[i])) / (len(vecs) - 1)
    return (to_question + others) / 2


def _home(claim: Claim, subject: list[list[str]]) -> bool:
    """Whether the claim quotes a page whose title names a subject phrase whole."""
    return any(naming([phrase], terms(e.title)) >= 1.0
               for e in claim.evidence for phrase in subject)


def _fit(text: str, subject: list[list[str]]) -> bool:
    """Names at least half of some subject phrase (the claim already passed the selection gate,
    maybe on its page title or meaning), and does not open on a pronoun or as a verbless
    definition."""
    opening = text.lstrip("*_\"'“‘(")
    if _ANAPHOR.match(opening) or _DEFINITION.match(opening):
        return False
    return not subject or naming(subject, terms(text)) >= 0.5
