"""A corpus search over Source objects held in memory, for unit tests of the offline planner:
each page's best sentence for the query by shared content words (the real one is
core.search.corpus.CorpusSearch), best pages first, ties by url. Snippets are verbatim."""

from __future__ import annotations

from typing import Callable, Sequence

from core.engine.sentences import sentences, terms
from core.models import SearchResult, Source


def memory_search(sources: Sequence[Source]) -> Callable[[str, int], list[SearchResult]]:
    pages = [(s, sentences(s.text, min_chars=12)) for s in sources]

    def search(query: str, k: int = 5) -> list[SearchResult]:
        want = set(terms(query))
        scored = []
        for source, spans in pages:
            title = set(terms(source.title))
            for span in spans:
                score = len(want & (set(terms(span.text)) | title))
                if score:
                    scored.append((-score, source.url, span.start, source, span.text))
        best: dict[str, tuple] = {}
        for row in sorted(scored, key=lambda r: r[:3]):
            best.setdefault(row[1], row)
        ranked = sorted(best.values(), key=lambda r: r[:3])[:k]
        return [SearchResult(url=r[3].url, title=r[3].title, snippet=r[4], rank=i)
                for i, r in enumerate(ranked, start=1)]

    return search
