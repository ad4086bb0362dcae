"""A corpus search over Source objects held in memory, for unit tests of the offline planner:
each page's best sentence for the query by shared content words (the real one is
core.search.corpus.CorpusSearch), best pages first, ties by url. Snippets are verbatim."""

from __future__ import annotations

from typing import Callable, Sequence

from core.engine.sentences import sentences, terms
from core.relevance.about import agree
from core.models import SearchResult, Source, Vocabulary, WordStats


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


def memory_vocabulary(sources: Sequence[Source]) -> Callable[[Sequence[str]], Vocabulary]:
    """What core.search.corpus_vocab tells of a topic's words, over pages held in memory: how
    many pages use each word (all its terms), and how many name it in their title."""
    pages = [(set(terms(s.text)) | set(terms(s.title)), set(terms(s.title))) for s in sources]

    def has(terms_: set[str], want: set[str]) -> bool:  # a stemmer's leniency: "scheduled"
        return all(any(agree(w, t) for t in terms_) for w in want)

    def vocabulary(words: Sequence[str]) -> Vocabulary:
        out = {}
        for word in words:
            want = set(terms(word))
            if want:
                out[word] = WordStats(documents=sum(has(used, want) for used, _ in pages),
                                      titled=sum(has(title, want) for _, title in pages))
        return Vocabulary(documents=len(pages), words=out)

    return vocabulary
