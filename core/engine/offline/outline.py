"""The offline plan: the question's own parts, each researched as a sub-question.

The topic is read in code (core.relevance.subject): its subject, the words the corpus knows it
by, and its parts. Each part is one sub-question, headed in the topic's words ("What is Python's
sqlite3 module for?", "What are sqlite3's main pitfalls?"), searched as the subject with the
part's own words, then as the subject alone. A comparison asks one sub-question per option, for
the purpose the question names ("SQLite for a small web app"), and one on how they differ.

Nothing here is mined from the corpus: a heading is the question's own (a report's sections),
or a source's real heading (a comparison's rows, core.engine.offline.extractive). A reviewer in
the Prefect UI therefore sees the question they asked, part by part. Deterministic: the same
topic and corpus give the same plan.
"""

from __future__ import annotations

from core.text.cjk import has_cjk
from core.engine.sentences import query_words
from core.text.language import resolve_language
from core.models import Part, ResearchPlan, SubQuestion, Topic
from core.relevance.subject import ASKING, Reading, VocabularyOf, content_words, read_topic

MAX_QUERY_WORDS = 8


def draft_plan(topic: Topic, vocabulary: VocabularyOf | None = None) -> ResearchPlan:
    """The plan for `topic`: one sub-question per part of it (at most max_subquestions)."""
    language = resolve_language(topic.language, topic.text)
    reading = read_topic(topic.text, vocabulary, language)
    n = max(1, topic.max_subquestions)
    subqs = tuple(SubQuestion(index=i, question=part.heading, queries=searches(part, reading),
                              focus=part.about, part=i, language=language)
                  for i, part in enumerate(reading.parts[:n]))
    if reading.options:
        intent = "recommend" if reading.question.recommend else "compare"
    else:
        intent = "describe"
    return ResearchPlan(topic=reading.question.text, brief=reading.question.text, intent=intent,
                        targets=reading.options, subquestions=subqs, language=language,
                        report_words=topic.report_words, parts=reading.parts,
                        aspects=reading.aspects)


def searches(part: Part, reading: Reading) -> tuple[str, ...]:
    """The subject with the part's own words, then the subject alone."""
    if part.kind == "part":
        subject = " ".join(part.about[:2]) or reading.subject
        words = part.text
    else:  # an option (or all of them) for the purpose the question names
        subject = " ".join(part.about)
        words = reading.question.context
    said = subject.lower().split()
    own = [w for w in search_words(words) if w.lower() not in said and w not in subject]
    first = " ".join((subject.split() + own)[:MAX_QUERY_WORDS])
    return tuple(dict.fromkeys(q for q in (first, subject) if q.strip())) or (part.heading,)


def search_words(text: str) -> list[str]:
    """A part's words for a search: its content words as written (question wording such as
    "pitfalls" included, a search engine makes use of it), Chinese cut into words."""
    if has_cjk(text):
        return [w for w, _, _ in content_words(text)]
    return [w for w in query_words(text) if w.lower() not in ASKING]

