"""The gate before a report is written, whichever engine researched the topic: each part of the
question is judged answered or not from its evidence, and evidence that is not about the part's
subject is no evidence.

    judge(plan, findings) -> Judgement     what answers each part; evidence off the subject out
    passed(plan, findings, where) -> Judgement, or NoEvidence when no part is answered
    refused(plan, judged) -> bool            what `passed` raises on

A part is answered when quotes (researched for it or another part) are about its subject
(they, their page's title or their section name one of the part's keys: core.relevance.about),
the quotes of one page name most of what the part asks (its words weighed by their rarity in
the corpus: `coverage`, where a word the corpus never uses, "sourdough", weighs the most), and
the corpus knows every name the part asks about (Kubernetes; a comparison's options). How
options differ is answered by quotes about two options at least. A sub-question a reviewer
wrote (it has no part) asks a part of its own, read from its words: the report answers the
reviewer, and names the topic's parts left unanswered.

A weak model quoting off-subject pages, and the extractive engine researching for it, meet the
same gate: the judgement reads the findings, not the engine that wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from core.topics.failures import NoEvidence

# Of what a part asks (its words weighed by rarity), what one page's evidence must name.
COVERAGE = 0.5
from core.models import Claim, Evidence, Finding, Part, ResearchPlan
from core.relevance.about import about, names
from core.relevance.subject import read_topic


@dataclass(frozen=True)
class Judgement:
    findings: tuple[Finding, ...]  # the findings with evidence off their part's subject removed
    answered: tuple[Part, ...]
    unanswered: tuple[Part, ...]
    reason: str = ""  # what the corpus has no page about, when no part is answered

    @property
    def headings(self) -> tuple[str, ...]:
        """The unanswered parts as the report names them."""
        return tuple(p.heading for p in self.unanswered)


def judge(plan: ResearchPlan, findings: Sequence[Finding]) -> Judgement:
    """Each part answered or not, and the findings kept on subject (see the module docstring).
    A plan without parts (read before this gate existed) passes whatever cites something."""
    if not plan.parts:
        cited = any(f.support for f in findings)
        return Judgement(tuple(findings), (), (), "" if cited else "the topic")
    # A reviewer's own question (no part: flows/plan_review) asks a part of its own.
    own = {sq.index: read_topic(sq.question).parts[0] for sq in plan.subquestions
           if sq.part is None and read_topic(sq.question).parts}
    every = [*plan.parts, *own.values()]
    # A quote answers every part it is about, whichever sub-question found it: a model's
    # sub-question on how two options differ also quotes what each one is.
    everywhere = tuple(range(len(every)))
    kept: list[Finding] = []
    quoted: dict[int, list[Evidence]] = {i: [] for i in everywhere}
    for finding in findings:
        claims: list[Claim] = []
        for claim in finding.claims:
            evidence = []
            for ev in claim.evidence:
                fits = [p for p in everywhere if _about(ev, every[p])]
                for p in fits:
                    quoted[p].append(ev)
                if fits:
                    evidence.append(ev)
            if evidence or not claim.evidence:  # a claim that quoted nothing stays as it was
                claims.append(claim.model_copy(update={"evidence": tuple(evidence)}))
        kept.append(finding.model_copy(update={"claims": tuple(claims)}))
    answered, unanswered = [], []
    for i, part in enumerate(every):
        (answered if _answers(part, quoted[i]) else unanswered).append(part)
    return Judgement(tuple(kept), tuple(answered), tuple(unanswered),
                     "" if answered else _missing(plan))


def passed(plan: ResearchPlan, findings: Sequence[Finding], where: str) -> Judgement:
    """The judgement, or NoEvidence naming what the corpus (`where`: the search backend's
    name) has no page about when not one part is answered."""
    judged = judge(plan, findings)
    if refused(plan, judged):
        raise NoEvidence(plan.topic, where, about=judged.reason or None)
    return judged


def refused(plan: ResearchPlan, judged: Judgement) -> bool:
    """Whether the gate turns these findings down: not one part answered (or, for a plan
    without parts, nothing cited)."""
    return not judged.answered and bool(plan.parts or judged.reason)


def _about(ev: Evidence, part: Part) -> bool:
    return about(ev.quote, ev.title, ev.section, part.about)


def _answers(part: Part, evidence: Sequence[Evidence]) -> bool:
    if part.unknown or not evidence or (part.kind != "part" and part.absent):
        return False
    if part.kind == "differ":
        covered = {key for key in part.about for ev in evidence
                   if about(ev.quote, ev.title, ev.section, (key,))}
        return len(covered) >= 2
    return part.kind == "option" or coverage(part, evidence) >= COVERAGE


def coverage(part: Part, evidence: Sequence[Evidence]) -> float:
    """The most of what the part asks that one page's evidence names (its quotes, title and
    headings), each word weighed by its rarity: an off-corpus question sharing a common word
    with the corpus ("care", "stop") names little of what it asks on any page."""
    total = sum(weight for _, weight in part.words)
    if total <= 0:
        return 1.0
    pages: dict[str, list[str]] = {}
    for ev in evidence:
        pages.setdefault(ev.url.split("#", 1)[0], []).extend((ev.quote, ev.title, ev.section))
    best = 0.0
    for texts in pages.values():
        said = " ".join(texts)
        best = max(best, sum(w for word, w in part.words if names(said, (word,))) / total)
    return best


def _missing(plan: ResearchPlan) -> str:
    """What the corpus has no page about: the words it never uses, in the topic's order, else
    the subject the parts ask about."""
    absent = [w for p in plan.parts for w in p.absent]
    if absent:
        return " ".join(dict.fromkeys(absent))
    keys = [k for p in plan.parts for k in p.about]
    return " / ".join(dict.fromkeys(keys)) or plan.topic

