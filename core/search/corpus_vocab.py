"""What a corpus's words are worth: in how many documents each occurs, and in how many a title
or heading names it (core.relevance reads a topic's subject from these counts).

    vocabulary(cursor, words) -> Vocabulary(documents, {word: WordStats(documents, titled)})

A word is counted as the index sees it, from the index's own tables (DuckDB's fts `dict` and
`terms`): a name written as code (pg_am, sqlite3) as one exact term; another Latin word by the
Porter stems of its letter runs ("write-ahead" is write and ahead, and a document must hold
them all); a Chinese, Japanese or Korean run by its character bigrams (core.text.cjk), all of
which a document must hold. Documents are files with
passages (a file's twin, core.search.corpus_build, counts once); "titled" means the page's title
or one of its headings (the index's `title` and `heads` fields) names the word. A word made only
of the index's stop words cannot be counted and is left out of the answer.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

import duckdb

from core.text import cjk
from core.models import Vocabulary, WordStats
from core.search.page_text import code_names

_LATIN = re.compile(r"[a-z]+")
# The fields of each fts index, by number (core.search.corpus_build._build_fts).
_WORD_TITLED = (0, 1)  # passages: title, heads (2: body)
_GRAM_TITLED = (1,)  # passage_grams: head_grams (0: grams)

def _uses(index: str) -> str:
    """(term, field, path) for the wanted terms of one fts index (its tables are per index)."""
    return f"""
SELECT d.term, t.fieldid, p.path
FROM fts_main_{index}.dict d
JOIN fts_main_{index}.terms t ON t.termid = d.termid
JOIN fts_main_{index}.docs dc ON dc.docid = t.docid
JOIN passages p ON p.passage_id = dc.name
WHERE d.term IN (SELECT unnest(json_transform(?, '["VARCHAR"]')))
GROUP BY ALL
"""


_WORDS, _GRAMS = _uses("passages"), _uses("passage_grams")


def vocabulary(cur: duckdb.DuckDBPyConnection, words: Sequence[str]) -> Vocabulary:
    """The counts for `words` (see the module docstring)."""
    documents = cur.execute("SELECT count(DISTINCT path) FROM passages").fetchone()[0]
    stop = {w for (w,) in cur.execute("SELECT sw FROM fts_main_passages.stopwords").fetchall()}
    latin: dict[str, list[str]] = {}
    grams: dict[str, list[str]] = {}
    for word in dict.fromkeys(words):
        code = code_names(word)
        if code == [word.lower()]:  # a name written as code is one exact term: pg_am, sqlite3
            latin[word], grams[word] = [], code
            continue
        tokens = [t for t in _LATIN.findall(word.lower()) if t not in stop]
        bigrams = cjk.bigrams(word)
        if tokens or bigrams:
            latin[word], grams[word] = tokens, bigrams
    stems = _stems(cur, sorted({t for ts in latin.values() for t in ts}))
    seen = _paths(cur, _WORDS, sorted(set(stems.values())), _WORD_TITLED)
    seen_grams = _paths(cur, _GRAMS, sorted({g for gs in grams.values() for g in gs}),
                        _GRAM_TITLED) if any(grams.values()) else {}
    out: dict[str, WordStats] = {}
    for word in latin:
        keys = [(seen, stems[t]) for t in latin[word]] + [(seen_grams, g) for g in grams[word]]
        body = [table.get(k, (set(), set()))[0] for table, k in keys]
        titled = [table.get(k, (set(), set()))[1] for table, k in keys]
        # A long Chinese word: two thirds of its bigrams (those across its own word boundaries
        # are noise); anything else: all of its parts.
        need = len(keys) if len(grams[word]) <= 3 else -(-2 * len(keys) // 3)
        out[word] = WordStats(documents=_holding(body, need), titled=_holding(titled, need))
        if out[word].documents and _bound(cur, word):
            out[word] = WordStats(documents=0, titled=0)
    return Vocabulary(documents=documents, words=out)


# Characters that glue Chinese words together: a neighbour that binds nothing.
_GLUE = set("的了和与及或是在有也都而就被把对之其这那些吗呢吧啊着过"
            "，。、；：！？（）《》“”‘’ ")
_HAN_WORD = re.compile(r"[\u4e00-\u9fff]{2}")
_BOUND_MIN_USES = 3  # uses of a word before one neighbour can show it is always inside another


def _bound(cur: duckdb.DuckDBPyConnection, word: str, limit: int = 200) -> bool:
    """A two-character Chinese word the corpus only ever writes inside a longer one: 基金 in
    基金会 (a foundation, not a fund). Without spaces, a bigram index cannot tell; its
    neighbours can: one character on one side of nearly every occurrence, or, for a word used
    once or twice, Han characters on both sides every time (软件基金会; but 足够成熟，ends a
    clause, so 成熟 is a word of its own)."""
    if not _HAN_WORD.fullmatch(word):
        return False
    sides: dict[tuple[int, str], int] = {}
    seen = inside = 0
    for (body,) in cur.execute("SELECT body FROM passages WHERE contains(body, ?) LIMIT ?",
                               [word, limit]).fetchall():
        at = body.find(word)
        while at >= 0:
            seen += 1
            bound = 0
            for side, ch in ((-1, body[at - 1] if at else ""),
                             (1, body[at + 2] if at + 2 < len(body) else "")):
                if ch and cjk.RUN.fullmatch(ch) and ch not in _GLUE:
                    sides[(side, ch)] = sides.get((side, ch), 0) + 1
                    bound += 1
            inside += bound == 2
            at = body.find(word, at + 1)
    if seen < _BOUND_MIN_USES:
        return seen > 0 and inside == seen
    return max(sides.values(), default=0) >= 0.8 * seen


def _holding(sets: list[set[str]], need: int) -> int:
    """How many paths are in at least `need` of `sets`."""
    if need >= len(sets):
        return len(set.intersection(*sets))
    counts: dict[str, int] = {}
    for paths in sets:
        for path in paths:
            counts[path] = counts.get(path, 0) + 1
    return sum(n >= need for n in counts.values())


def _stems(cur: duckdb.DuckDBPyConnection, tokens: list[str]) -> dict[str, str]:
    if not tokens:
        return {}
    rows = cur.execute("SELECT t, stem(t, 'porter') FROM (SELECT unnest(json_transform(?, "
                       "'[\"VARCHAR\"]')) AS t)", [json.dumps(tokens)]).fetchall()
    return dict(rows)


def _paths(cur: duckdb.DuckDBPyConnection, sql: str, terms: list[str],
           titled_fields: tuple[int, ...]) -> dict[str, tuple[set[str], set[str]]]:
    """term -> (paths using it anywhere, paths naming it in a titled field)."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    if not terms:
        return out
    for term, field, path in cur.execute(sql, [json.dumps(terms)]).fetchall():
        anywhere, titled = out.setdefault(term, (set(), set()))
        anywhere.add(path)
        if field in titled_fields:
            titled.add(path)
    return out
