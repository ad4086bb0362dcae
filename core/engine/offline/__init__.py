"""The offline extractive engine: every role, with no network and no model weights.

    extractive.py   ExtractiveEngine: the roles, assembled from the modules below
    planning.py     the plan: intent, sub-questions and searches from the topic's own parts
    intent.py       what a topic asks (intent_en for English, intent_cjk for Chinese,
                    Japanese and Korean; parts.py holds what both readers fill in)
    kinds.py        what kind of question it is (cause, history, how-to...; kinds_zh)
    aspects.py      the aspects a kind of question is asked about
    phrasing.py     sub-questions phrased from the parts, never the topic in a template
    selection.py    which sentences of a page answer a sub-question (words and meaning)
    summary.py      the summary: one central claim per section
    words.py        the report's own few words, in its language

Meaning comes from the shared offline embedder (core.embedding). Deterministic: the same corpus
and topic give the same report.
"""

from core.engine.offline.extractive import ExtractiveEngine

__all__ = ["ExtractiveEngine"]
