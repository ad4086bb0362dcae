"""What a topic asks, read from its own words: intent, the options compared, subject, verb, aspect.

    parse_topic("How do SQLite and PostgreSQL handle concurrent writes?")
      -> TopicParts(intent="compare", targets=("SQLite", "PostgreSQL"), verb="handle",
                    aspect="concurrent writes", plural=True, ...)
    parse_topic("How does asyncio cancel a task?")
      -> TopicParts(intent="describe", subject="asyncio", verb="cancel", aspect="a task")

The offline planner phrases sub-questions from these parts (core.engine.phrasing), so a
question is never the whole topic pasted into a template. English is read by a small
hand-written grammar in core.engine.intent_en (question word, auxiliary, noun phrase, verb from
a lexicon, object); Chinese, Japanese and Korean in core.engine.intent_cjk. It does not
translate, call a model or guess beyond its patterns: what it cannot parse becomes a describe
topic about the whole text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from core.language import detect_language, is_cjk
from core.models import Intent


@dataclass(frozen=True)
class TopicParts:
    """The pieces of a topic that sub-questions are built from (all as the topic wrote them)."""

    intent: Intent = "describe"
    targets: tuple[str, ...] = ()  # the options compared, two or more
    subject: str = ""  # what a describe topic is about; "" for a how-to ("How do I ...")
    plural: bool = False  # the subject takes "do"/"are"
    verb: str = ""  # base form: "handle", "cancel"; "" when the topic names no action
    aspect: str = ""  # the verb's object or complement: "concurrent writes", "a task"
    context: str = ""  # with its preposition: "for concurrent I/O in Python", "in Python"
    purpose: str = ""  # recommend without options: "to parse arguments", "for a web app"
    criterion: str = ""  # what a comparison is judged on: "speed" (from "faster than")
    owner: str = ""  # what the options belong to: "Python" in "Python的asyncio和threading"
    passive: str = ""  # the participle of "How is X implemented": "implemented"
    language: str = "en"  # the language the topic is written in (not the plan's)


def parse_topic(text: str) -> TopicParts:
    """The parts of `text`; the same text always gives the same parts."""
    text = " ".join(text.split())
    language = detect_language(text)
    if is_cjk(language):
        from core.engine.intent_cjk import parse_cjk  # CJK rules only for CJK topics
        return parse_cjk(text, language)
    from core.engine.intent_en import parse_english
    return replace(parse_english(text.strip(" ?.!")), language=language)


# Options as a topic lists them: "threading, multiprocessing and asyncio", "X or Y", "X vs Y".
_FILLER = frozenset("which what one ones it them both either neither other others the other "
                    "something anything".split())
ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.I)
_OPTION_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or|vs\.?|versus)\s+", re.I)


def split_options(text: str) -> tuple[str, ...]:
    """"threading, multiprocessing and asyncio" -> the three options, articles dropped."""
    items = [ARTICLE.sub("", i.strip(" ,.;:")) for i in _OPTION_SPLIT.split(text)]
    # Not `terms`: an option may be a stop word of the ranker ("Is Go faster than Python").
    items = [" ".join(i.split()) for i in items
             if any(ch.isalnum() for ch in i) and i.lower() not in _FILLER]
    return tuple(dict.fromkeys(items))
