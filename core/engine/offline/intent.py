"""What a topic asks, read from its own words: intent, the options compared, subject, verb, aspect.

    parse_topic("How do SQLite and PostgreSQL handle concurrent writes?")
      -> TopicParts(intent="compare", targets=("SQLite", "PostgreSQL"), verb="handle",
                    aspect="concurrent writes", plural=True, ...)
    parse_topic("How does asyncio cancel a task?")
      -> TopicParts(intent="describe", subject="asyncio", verb="cancel", aspect="a task")

The offline planner phrases sub-questions from these parts (core.engine.offline.phrasing), so a
question is never the whole topic pasted into a template. English is read by a small
hand-written grammar in core.engine.offline.intent_en (question word, auxiliary, noun phrase, verb from
a lexicon, object); Chinese, Japanese and Korean in core.engine.offline.intent_cjk. It does not
translate, call a model or guess beyond its patterns: what it cannot parse becomes a describe
topic about the whole text.
"""

from __future__ import annotations

from dataclasses import replace

from core.engine.offline.parts import TopicParts, split_options  # noqa: F401 - re-exported
from core.language import detect_language, is_cjk


def parse_topic(text: str) -> TopicParts:
    """The parts of `text`; the same text always gives the same parts."""
    text = " ".join(text.split())
    language = detect_language(text)
    if is_cjk(language):
        from core.engine.offline.intent_cjk import parse_cjk  # CJK rules only for CJK topics
        return parse_cjk(text, language)
    from core.engine.offline.intent_en import parse_english
    return replace(parse_english(text.strip(" ?.!")), language=language)
