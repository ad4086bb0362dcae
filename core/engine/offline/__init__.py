"""The offline extractive engine: every role, with no network and no model weights.

    extractive.py   ExtractiveEngine: the roles, assembled from the modules below
    outline.py      the plan: sections drawn from what the corpus holds for the topic
    question.py     the little read from the topic: its parts, the options it compares,
                    whether it asks for a recommendation
    selection.py    which sentences of a page answer a sub-question (words and meaning)
    summary.py      the summary: one central claim per section
    words.py        the report's own few words, in its language

Meaning comes from the shared offline embedder (core.embedding). Deterministic: the same corpus
and topic give the same report.
"""

from core.engine.offline.extractive import ExtractiveEngine

__all__ = ["ExtractiveEngine"]
