"""The parts of a topic the offline planner builds sub-questions from, and how a topic lists
the options it compares. Below both readers (intent_en, intent_cjk) and the intent module that
chooses between them, so none of them imports another in a circle."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
