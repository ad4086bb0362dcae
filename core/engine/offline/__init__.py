"""The offline extractive engine: every role, with no network and no model weights.

    extractive.py   ExtractiveEngine: the roles, assembled from the modules below
    outline.py      the plan: the question's own parts (core.relevance reads them), each a
                    sub-question searched as its subject with its own words
    selection.py    which sentences of a page answer a sub-question: about the subject,
                    ranked by words and meaning
    summary.py      the summary: one central claim per section
    words.py        the report's own few words, in its language

Meaning comes from the shared offline embedder (core.embedding). Deterministic: the same corpus
and topic give the same report.
"""

from core.engine.offline.extractive import ExtractiveEngine

__all__ = ["ExtractiveEngine"]
