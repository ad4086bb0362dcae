"""Ranking corpus passages for a query: BM25 finds candidates, meaning re-orders them.

`candidate_query(query, k)` is the SQL for the candidates: the query's words are scored by the
word index (Porter-stemmed English) and its CJK bigrams and code names (pg_am, sqlite3) by the
exact-term index (core.text.cjk, core.search.page_text.code_names); a passage's BM25 is the
sum of both. It keeps the best few passages of each document and about
5·k passages in all, so there are enough documents to fill k results after re-ranking.

`rerank(query, candidates, k, ...)` blends each candidate's BM25, divided by the best candidate's
(so 1.0 is "the best keyword match"), with the cosine similarity of its text to the query from
the shared offline embedder (core.text.embedding), also divided by the best candidate's, and
the share of the query its page's title says (or half the share its chapter's name says, the
heading over the whole page), and half again for the chapter's own page, whose title is the
chapter other candidates sit in: `(1 - w)·bm25/bm25_max + w·max(cos, 0)/cos_max +
t·(max(named², h·chapter²) + h·[own page of their chapter])`. Keyword counts
say a passage mentions the words; the embedding says it is about them, which demotes a passage
stuffed with the query's words on another subject. Then one passage per document, best first:
a document ranks by its best passage and is shown by the passage whose headings say most of the
query (the section named for it, in a long page). Ties break on (path, passage) so equal inputs
always give equal outputs.

`snippet(body, query)` picks the passage's sentence that best matches the query — by shared
bigrams for a CJK query, whose sentences end in 。 without a following space — verbatim.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from core.text import cjk
from core.search import page_text as textlib

log = logging.getLogger(__name__)

CANDIDATES_PER_RESULT = 5
MIN_CANDIDATES = 20
PER_DOCUMENT = 3  # passages of one document among the candidates: room for other documents
SEMANTIC_WEIGHT = 0.5
# What a page's title matching the query adds to its blend, against the best title's match:
# a reference page named for the subject beats pages that only repeat its words.
TITLE_WEIGHT = 0.5
CHAPTER_SHARE = 0.5  # a chapter's name over a page, against the page's own title
TITLED_CANDIDATES = 30  # passages of the best-titled pages added to the body's candidates
_BOOK_LABELS = frozenset({"chapt", "appen", "part"})  # "Chapter 49." is where a title sits
_MAX_WORDS = 32
_MAX_GRAMS = 64
_CJK_SENTENCE = re.compile(r"[^。！？!?\n]*(?:[。！？!?]+|\n|$)")


class Similarity(Protocol):
    def similarities(self, query: str, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Candidate:
    path: str
    ord: int
    title: str
    body: str
    bm25: float
    titled: float = 0.0  # the BM25 of the query against the page's title and headings alone
    heads: str = ""  # the headings over the passage and in it (its chapter's among them)


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    score: float  # the blend, in [0, 1]: 1 is the best on both scales
    cosine: float


@dataclass(frozen=True)
class CandidateQuery:
    sql: str
    params: list


def candidate_query(query: str, k: int) -> CandidateQuery | None:
    """The SQL and parameters that list candidates as (path, ord, title, body, bm25, titled,
    heads); None when the query has nothing to search for. `titled` is the BM25 of the query
    against the page's title and the passage's headings alone: a page named for what is asked
    ("MERGE", "WAL Configuration"), or a page of a chapter so named ("Getting Started"), is a
    candidate however often other pages say the words, and ranks by it (`rerank`)."""
    words = [w for w in textlib.query_terms(query) if not cjk.RUN.fullmatch(w)][:_MAX_WORDS]
    grams = list(dict.fromkeys(cjk.bigrams(query) + textlib.code_names(query)))[:_MAX_GRAMS]
    parts, named, params, named_params = [], [], [], []
    if words:
        parts.append("SELECT passage_id, fts_main_passages.match_bm25(passage_id, ?) AS s "
                     "FROM passages")
        named.append("SELECT passage_id, fts_main_passages.match_bm25(passage_id, ?, "
                      "fields := 'title,heads') AS s FROM passages")
        params.append(" ".join(words))
        named_params.append(" ".join(words))
    if grams:
        parts.append("SELECT passage_id, fts_main_passage_grams.match_bm25(passage_id, ?) AS s "
                     "FROM passage_grams")
        named.append("SELECT passage_id, fts_main_passage_grams.match_bm25(passage_id, ?, "
                     "fields := 'head_grams') AS s FROM passage_grams")
        params.append(" ".join(grams))
        named_params.append(" ".join(grams))
    if not parts or k <= 0:
        return None
    sql = f"""
        WITH scored AS (
            SELECT passage_id, sum(s) AS score FROM ({" UNION ALL ".join(parts)})
            WHERE s IS NOT NULL GROUP BY passage_id),
        titled AS (
            SELECT passage_id, sum(s) AS t FROM ({" UNION ALL ".join(named)})
            WHERE s IS NOT NULL GROUP BY passage_id),
        ids AS (
            SELECT passage_id FROM scored
            UNION SELECT passage_id FROM (SELECT passage_id FROM titled ORDER BY t DESC
                                          LIMIT {TITLED_CANDIDATES}))
        SELECT p.path, p.ord, p.title, p.body, coalesce(scored.score, 0) AS score,
               coalesce(titled.t, 0) AS t, coalesce(p.heads, '') AS heads
        FROM ids JOIN passages p USING (passage_id)
        LEFT JOIN scored USING (passage_id) LEFT JOIN titled USING (passage_id)
        QUALIFY row_number() OVER (PARTITION BY p.path ORDER BY score DESC, p.ord)
                <= {PER_DOCUMENT}
        ORDER BY score + t DESC, p.path, p.ord
        LIMIT ?"""
    return CandidateQuery(sql, [*params, *named_params,
                                max(MIN_CANDIDATES, CANDIDATES_PER_RESULT * k)])


def rerank(query: str, candidates: Sequence[Candidate], k: int, *,
           embedder: Similarity | None, weight: float = SEMANTIC_WEIGHT) -> list[Ranked]:
    """The best passage of each of the k best documents (see module docstring)."""
    if not candidates or k <= 0:
        return []
    top = max(c.bm25 for c in candidates) or 1.0
    if embedder is not None and weight > 0:
        cosines = embedder.similarities(query, [f"{c.title}\n{c.body}" for c in candidates])
        titles = TITLE_WEIGHT
    else:  # keywords alone (a broken install, or semantic_weight=0): BM25 only
        weight, cosines, titles = 0.0, np.zeros(len(candidates), dtype=np.float32), 0.0
    # Both scales are relative to the best candidate: cosines of one small model bunch up
    # (0.3-0.7 on topic), and dividing by the best spreads them like BM25's share of the top.
    best_cos = max(float(cosines.max(initial=0.0)), 1e-6)
    asked = _title_terms(query)
    # Each candidate's title, chapter (its outermost heading) and headings, as terms, once.
    said = [(_title_terms(c.title), _title_terms(c.heads.split(" · ", 1)[0]),
             _title_terms(c.heads)) for c in candidates]
    # The chapters other pages among the candidates sit in: a page titled with one of them is
    # that chapter's own page ("Chapter 49. Logical Decoding" for "49.2. Logical Decoding
    # Concepts" and its siblings), the overview of what they each treat a part of.
    chapters: dict[frozenset[str], set[str]] = {}
    for c, (_, chapter_terms, _) in zip(candidates, said):
        if c.heads:
            chapters.setdefault(frozenset(chapter_terms), set()).add(c.path)
    scored, headed = [], {}
    for c, cos, (title_terms, chapter_terms, heads_terms) in zip(candidates, cosines.tolist(),
                                                                 said):
        counted = bool(asked) and c.titled > 0  # a title or heading matched the query
        # How much of the query the page's title says, squared so that a title naming all of
        # it counts ("CREATE INDEX" for "create index") and one naming a word of three little
        # ("Python snakes" for "python memory leak").
        named = _share(asked, title_terms) if counted else 0.0
        # What the page's title and the headings over this passage say of the query together:
        # under a title that says all of it, every passage says as much.
        headed[(c.path, c.ord)] = (round(_share(asked, title_terms | heads_terms), 9)
                                   if counted else 0.0)
        # A page of a chapter named for what is asked ("1.1. Installation" in "Getting
        # Started", whose own page only lists its sections) counts half a page so titled.
        chapter = _share(asked, chapter_terms) if counted else 0.0
        own = frozenset(title_terms - _BOOK_LABELS)
        hub = named == 1.0 and bool(own) and bool(chapters.get(own, set()) - {c.path})
        blend = ((1 - weight) * c.bm25 / top + weight * max(cos, 0.0) / best_cos
                 + titles * (max(named ** 2, CHAPTER_SHARE * chapter ** 2)
                             + (CHAPTER_SHARE if hub else 0.0)))
        # Rounded so float noise never decides an order that the tie-break should.
        scored.append((-round(blend, 9), c.path, c.ord, Ranked(c, blend, cos)))
    scored.sort(key=lambda row: row[:3])
    # A document ranks by its best passage, and is read from the passage whose headings say
    # most of the query: in a chapter of fifty sections, the one under "Debian 档案库基础"
    # rather than a sentence elsewhere that refers to it.
    shown: dict[str, Ranked] = {}
    for _neg, path, ord_, ranked in scored:
        if path not in shown or headed[(path, ord_)] > headed[(path, shown[path].candidate.ord)]:
            shown[path] = ranked
    best: list[Ranked] = []
    for _neg, path, _ord, ranked in scored:
        if len(best) == k:
            break
        if path in shown:
            best.append(Ranked(shown.pop(path).candidate, ranked.score, ranked.cosine))
    return best


def _share(asked: set[str], said: set[str]) -> float:
    """How much of the query's terms `said` holds."""
    return len(asked & said) / len(asked)


def _title_terms(text: str) -> set[str]:
    """Words and code names of a title or query, compared by their first five letters, and its
    CJK bigrams."""
    words = {w[:5] for w in textlib.query_terms(text) if len(w) > 2 and not cjk.RUN.match(w)}
    return words | set(cjk.bigrams(text)) | set(textlib.code_names(text))


def snippet(body: str, query: str, max_chars: int = 300) -> str:
    """The sentence of body that best matches query, at most max_chars, verbatim."""
    grams = set(cjk.bigrams(query))
    if not grams:
        return textlib.best_sentence(body, query, max_chars)
    best, best_score = "", (-1, False)
    for match in _CJK_SENTENCE.finditer(body):
        piece = match.group(0).strip()
        if not piece:
            continue
        # On equal overlap a sentence beats a heading (which has no closing punctuation).
        score = (len(grams.intersection(cjk.bigrams(piece))), piece[-1] in "。！？!?.")
        if score > best_score:
            best, best_score = piece, score
    return textlib.trim_text(best, max_chars) if best else textlib.best_sentence(
        body, query, max_chars)
