"""The offline planner: a topic's intent, its comparison targets and its sub-questions."""

from __future__ import annotations

import re
from typing import Sequence

from core.engine.text import query_words, terms
from core.language import resolve_language
from core.models import Intent, ResearchPlan, SubQuestion, Topic

_COMPARE = re.compile(r"\b(compare|comparing|comparison|versus|vs\.?|differences? between|"
                      r"difference of|differ)\b", re.I)
_RECOMMEND = re.compile(r"\b(should i|which (?:one|is best|to use)|recommend\w*|best way|"
                        r"choose|choosing|when to use)\b", re.I)
_CONTEXT_SPLIT = re.compile(r"\b(?:for|in|when|on|to)\b", re.I)
_LEAD = re.compile(r"^(?:how (?:does|do|is|are|can|should)|what (?:is|are|does)|why (?:does|do|is|are)|"
                   r"which (?:\w+ )?(?:should i (?:use|choose|pick)|to use|is best)(?: for)?|"
                   r"should i (?:use|choose|pick)|explain|"
                   r"describe|tell me about)(?:\s*:\s*|\s+)", re.I)
_TRAIL = re.compile(r"\s+(?:work|works|mean|means|do)\s*$", re.I)

# Dimensions of difference for comparisons (seed 002 §5.4): each sub-question compares every
# target along one axis, rather than one paragraph per option.
_DIMENSIONS = (
    ("How do {targets} differ in purpose and design{context}?", ("purpose design", "model")),
    ("How do {targets} differ in performance and scalability{context}?",
     ("performance", "blocking overhead")),
    ("How do {targets} differ in safety, correctness and limitations{context}?",
     ("limitation safe", "restriction")),
    ("How do {targets} differ in their APIs and typical usage{context}?",
     ("usage example", "create")),
    ("How do {targets} differ in error handling{context}?", ("exception error", "raise")),
    ("How do {targets} differ in compatibility and interoperability{context}?",
     ("compatible", "support")),
)
_ASPECTS = {
    "describe": (
        ("What is {subject} and what is it for?", ("{kp}", "{kp} overview")),
        ("How does {subject} work?", ("{kp} how it works",)),
        ("How is {subject} used in practice?", ("{kp} usage example",)),
        ("What are the limitations and pitfalls of {subject}?", ("{kp} limitation", "{kp} error")),
        ("How does {subject} relate to alternatives?", ("{kp} alternative",)),
        ("What details or options of {subject} matter most?", ("{kp} option parameter",)),
    ),
    "recommend": (
        ("What options exist for {subject}?", ("{kp}", "{kp} alternative")),
        ("What criteria matter when choosing for {subject}?", ("{kp} performance",)),
        ("What are the trade-offs between the options for {subject}?", ("{kp} limitation",)),
        ("When is each option the right choice for {subject}?", ("{kp} usage",)),
        ("What pitfalls should be avoided with {subject}?", ("{kp} error",)),
        ("What does a minimal working approach to {subject} look like?", ("{kp} example",)),
    ),
}


def _intent(text: str) -> Intent:
    if _COMPARE.search(text):
        return "compare"
    if _RECOMMEND.search(text):
        return "recommend"
    return "describe"


def _targets(text: str) -> tuple[tuple[str, ...], str]:
    """The options a comparison is between, and the context phrase after them ("for I/O")."""
    body = re.sub(r"\b(?:vs\.?|versus)(?=\s)", ",", text, flags=re.I)
    body = _LEAD.sub("", _COMPARE.sub(" ", body).strip(" ?.!:"))
    if ":" in body:  # "serializing data: json or pickle" -> options after the colon
        context, _, head = (x.strip() for x in body.rpartition(":"))
        context = re.sub(r"^(?:for|to)\s+", "", context, flags=re.I)
    else:
        parts = _CONTEXT_SPLIT.split(body, maxsplit=1)
        head, context = parts[0], (parts[1].strip() if len(parts) > 1 else "")
    items = [i.strip(" ,.;") for i in re.split(r",|\band\b|\bor\b|\bvs\.?|\bversus\b", head)]
    # "the difference between the lists and tuples": articles and spacing are not the option.
    items = [" ".join(re.sub(r"^(?:the|a|an)\s+", "", i, flags=re.I).split()) for i in items]
    items = [i for i in items if i and terms(i)]
    return tuple(dict.fromkeys(items)), context


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def plan_topic(topic: Topic) -> ResearchPlan:
    text = " ".join(topic.text.split())
    intent = _intent(text)
    targets, context = _targets(text) if intent != "describe" else ((), "")
    n = topic.max_subquestions
    if len(targets) >= 2:
        subqs = []
        dims = list(_DIMENSIONS[: n - 1 if intent == "recommend" else n])
        if intent == "recommend":
            dims.append(("When should each of {targets} be chosen{context}?",
                         ("recommended use", "suitable")))
        ctx = f" for {context}" if context else ""
        ctx_terms = " ".join(query_words(context)[:2])
        for i, (question, extra) in enumerate(dims):
            q = question.format(targets=_join(targets), context=ctx)
            queries = tuple(f"{t} {extra[j % len(extra)]} {ctx_terms}".strip()
                            for j, t in enumerate(targets))[:3]
            subqs.append(SubQuestion(index=i, question=q, queries=queries, focus=targets))
        brief = (f"Compare {_join(targets)}" + (f" for {context}" if context else "") +
                 " along dimensions of difference, quoting the sources for each claim.")
    else:
        intent = "describe" if intent == "compare" else intent
        targets = ()  # one option is not a comparison: no targets, no comparison table
        subject = _TRAIL.sub("", _LEAD.sub("", text.rstrip("?.! "))) or text
        kp = " ".join(query_words(subject)[:3]) or subject
        # "garbage collection and reference counting" -> either phrase, all of its words.
        focus = tuple(p for p in (x.strip() for x in re.split(r",|\band\b|\bor\b", subject))
                      if terms(p))
        subqs = [SubQuestion(index=i, question=q.format(subject=subject),
                             queries=tuple(x.format(kp=kp) for x in qs), focus=focus)
                 for i, (q, qs) in enumerate(_ASPECTS.get(intent, _ASPECTS["describe"])[:n])]
        brief = f"Research: {subject}. Answer each sub-question from quoted sources."
    language = resolve_language(topic.language, text)
    subqs = [sq.model_copy(update={"language": language}) for sq in subqs]
    return ResearchPlan(topic=text, brief=brief, intent=intent, targets=targets,
                        subquestions=tuple(subqs), language=language,
                        report_words=topic.report_words)
