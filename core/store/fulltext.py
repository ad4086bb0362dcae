"""Full-text search over a store's reports and sources, without ever writing to the store.

What it does: `search_store` ranks reports (title and markdown) and sources (title and extracted
text) against a query with BM25 and returns hits with a short snippet around the first match.
The terms live in an index of their own, a DuckDB file the caller names (a cache: delete it and
the next search rebuilds it) or, with `index=None`, in memory for one search. Before each search
the index catches up with the store: only reports and sources that are new or saved again since
the last search (reports.created_at, sources.last_seen) are tokenised, and rows gone from the store
are dropped. A page is indexed in the version read last (`sources` keeps every version). The
store is attached read-only (`query.attached_readonly`), twice and briefly: to copy what
changed, and to read the hits' text for snippets. Tokenising runs detached, so a writer
in another process waits at most for a copy, never for an index build.

Why not the fts extension's own index (`PRAGMA create_fts_index`): it is rebuilt whole or not at
all. On 500 reports and 10,000 sources of ~15k characters (150 MB of text, 2 busy cores) one
build took 26-49 s (24-32 s of CPU) and 2-2.5 GB, which an in-memory index would pay on every
search and a cached one after every batch. Here the first build of that store takes 20-28 s
(18 s of CPU) and 1.2 GB, a batch's 210 new rows about 1 s, and a search 0.1-0.2 s.

Tokens: lower-cased runs of letters, marks and digits. Words are accent-stripped and stemmed with
the extension's Porter `stem` (so "running" finds "runs"). Han, kana and Hangul are written without
spaces between words, so their runs become overlapping character bigrams, as in Lucene's CJK
analyzer: "数据库" (数据, 据库) finds "嵌入式数据库". The query goes through the same SQL.

What it does not do: phrases or boolean operators (a hit matches any term; documents with more of
the terms, and rarer ones, rank higher), or notice a row edited behind its timestamp (by hand in a
DuckDB shell; delete the index file then).
"""

from __future__ import annotations

import fcntl
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from core.text.fts import load_fts
from core.models import stable_id
from core.text import cjk
from core.store.connection import StoreError
from core.store.query import attached_readonly

log = logging.getLogger("researchflow.store.fulltext")

Kind = Literal["all", "reports", "sources"]
KINDS: dict[str, list[str]] = {"all": ["report", "source"], "reports": ["report"],
                               "sources": ["source"]}
# Bump when tokens change: an index built with other tokens is dropped and rebuilt.
TOKENIZER = "1"
_CHUNK = 2_000  # documents tokenised per statement: bounds memory on a first build
_K1, _B = 1.2, 0.75  # the usual BM25 constants

_CJK = cjk.RE2_CLASS
_MACROS = rf"""
CREATE OR REPLACE TEMP MACRO rf_words(s) AS
    list_filter(regexp_split_to_array(lower(s), '[^\p{{L}}\p{{M}}\p{{N}}]+'), w -> w <> '');
CREATE OR REPLACE TEMP MACRO rf_piece(r) AS CASE
    WHEN regexp_matches(r, '^[{_CJK}]') THEN
        CASE WHEN length(r) = 1 THEN [r]
             ELSE list_transform(range(1, length(r)), i -> substr(r, i, 2)) END
    WHEN length(r) > 40 THEN []
    ELSE [stem(strip_accents(r), 'porter')] END;
CREATE OR REPLACE TEMP MACRO rf_terms(w) AS CASE
    WHEN regexp_matches(w, '[{_CJK}]') THEN flatten(list_transform(
        regexp_extract_all(w, '[{_CJK}]+|[^{_CJK}]+'), r -> rf_piece(r)))
    ELSE rf_piece(w) END;
"""
_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS docs (doc_id INTEGER, kind VARCHAR, key VARCHAR, stamp TIMESTAMPTZ,
                                 len INTEGER);
CREATE TABLE IF NOT EXISTS postings (term VARCHAR, doc_id INTEGER, tf INTEGER);
"""
# A page is searched as it was last read: the version of each URL seen last (schema v13
# keeps every version; older ones are read through the reports that cite them).
_LATEST_SOURCES = """(SELECT * FROM rf_store.sources QUALIFY row_number() OVER (
    PARTITION BY source_id ORDER BY last_seen DESC, first_seen DESC, content_hash) = 1)"""
# What the store holds now, and the text of what the index lacks (run with the store attached).
_CURRENT = f"""
CREATE OR REPLACE TEMP TABLE current_docs AS
SELECT 'report' AS kind, report_id AS key, created_at AS stamp FROM rf_store.reports
UNION ALL SELECT 'source', source_id, last_seen FROM {_LATEST_SOURCES};
CREATE OR REPLACE TEMP TABLE fresh AS
SELECT kind, key, stamp FROM current_docs EXCEPT SELECT kind, key, stamp FROM docs;
"""
_STAGING = f"""
CREATE OR REPLACE TEMP TABLE staging AS
SELECT f.kind, f.key, f.stamp, coalesce(r.title, '') || chr(10) || r.markdown AS body
FROM fresh f JOIN rf_store.reports r ON f.kind = 'report' AND r.report_id = f.key
UNION ALL
SELECT f.kind, f.key, f.stamp, coalesce(s.title, '') || chr(10) || coalesce(s.text, '')
FROM fresh f JOIN {_LATEST_SOURCES} s ON f.kind = 'source' AND s.source_id = f.key
"""
_STALE = """
CREATE OR REPLACE TEMP TABLE stale AS
SELECT d.doc_id FROM docs d ANTI JOIN current_docs c USING (kind, key, stamp)
"""
# Words are counted per document first, then each distinct word is stemmed once: a corpus has
# millions of words but only thousands of distinct ones.
_TOKENISE = """
CREATE OR REPLACE TEMP TABLE chunk_postings AS
WITH words AS (
    SELECT doc_id, w, count(*)::INTEGER AS tf
    FROM (SELECT doc_id, unnest(rf_words(body)) AS w FROM numbered
          WHERE doc_id >= ? AND doc_id < ?)
    GROUP BY ALL),
vocab AS (SELECT w, rf_terms(w) AS terms FROM (SELECT DISTINCT w FROM words))
SELECT term, doc_id, sum(tf)::INTEGER AS tf
FROM (SELECT unnest(v.terms) AS term, words.doc_id, words.tf FROM words JOIN vocab v USING (w))
GROUP BY ALL
"""
_TERMS = """
SELECT coalesce(list(DISTINCT term ORDER BY term), [])
FROM (SELECT unnest(rf_terms(w)) AS term FROM (SELECT unnest(rf_words(?)) AS w))
"""
_RANK = f"""
WITH q AS (SELECT DISTINCT unnest(?::VARCHAR[]) AS term),
d AS (SELECT doc_id, kind, key, len FROM docs WHERE list_contains(?::VARCHAR[], kind)),
stats AS (SELECT count(*) AS n, avg(len) AS avgdl FROM d),
hits AS MATERIALIZED (SELECT term, doc_id, tf FROM postings
                      SEMI JOIN q USING (term) SEMI JOIN d USING (doc_id)),
df AS (SELECT term, count(*) AS df FROM hits GROUP BY term)
SELECT d.kind, d.key,
       sum(ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
           * h.tf * {_K1 + 1} / (h.tf + {_K1} * (1 - {_B} + {_B} * d.len / stats.avgdl))) AS score
FROM hits h JOIN df USING (term) JOIN d USING (doc_id) CROSS JOIN stats
GROUP BY d.kind, d.key
ORDER BY score DESC, d.kind, d.key
LIMIT ?
"""


@dataclass(frozen=True)
class Hit:
    """One match: a report (key: report_id) or a source (key: its URL)."""

    kind: Literal["report", "source"]
    key: str
    title: str
    snippet: str
    score: float


def search_store(store: Path, query: str, *, index: Path | None = None, kind: Kind = "all",
                 limit: int = 10, lock_timeout: float = 3.0,
                 on_indexing: Callable[[int], None] | None = None) -> list[Hit]:
    """The best `limit` matches for `query`, best first; [] when nothing matches.

    index: the index file (created if missing, brought up to date otherwise); None: build one in
    memory for this search. on_indexing(n) is called before n documents are tokenised.
    Raises ValueError for a query without a word, StoreError for a missing or unreadable store
    (StoreLockedError: another process holds it for longer than lock_timeout).
    """
    store = Path(store).expanduser().resolve()
    with _index_connection(index) as con:
        _prepare(con, store)
        terms = con.execute(_TERMS, [query]).fetchone()[0]
        if not terms:
            raise ValueError(f"{query!r} has no words to search for")
        if limit <= 0:
            return []
        try:
            _catch_up(con, store, lock_timeout, on_indexing)
            ranked = con.execute(_RANK, [terms, KINDS[kind], limit]).fetchall()
            texts = _texts(con, store, lock_timeout, ranked) if ranked else {}
        except duckdb.Error as exc:  # e.g. a DuckDB file that is not a researchflow store
            raise StoreError(f"cannot search {store}: {exc}") from exc
    words = _query_words(query) + list(terms)
    hits = []
    for k, key, score in ranked:
        if (k, key) not in texts:  # deleted by a writer since the ranking
            continue
        shown, title, text = texts[(k, key)]
        text = _plain(text) if k == "report" else text
        hits.append(Hit(kind=k, key=shown, title=title, snippet=snippet(text, words),
                        score=float(score)))
    return hits


def index_for(store: Path, cache_dir: Path) -> Path:
    """Where the search index of a store file lives: one file per store, under the cache."""
    return Path(cache_dir).expanduser() / "search" / (
        f"{stable_id(str(Path(store).expanduser().resolve()))}.duckdb")


def snippet(text: str, words: Sequence[str], width: int = 120) -> str:
    """About `width` characters of `text` around the earliest occurrence of any of `words`
    (a word matches at the start of a word of the text, ignoring case), whitespace collapsed;
    the text's start when none occurs."""
    found = [m.start() for w in words if w
             for m in [re.search(_word_start(w), text, re.IGNORECASE)] if m]
    pos = min(found, default=0)
    start = max(0, pos - width // 3)
    if start:  # begin at a word boundary when one is near
        space = text.find(" ", start, pos)
        start = space + 1 if space != -1 and space - start < 20 else start
    end = min(len(text), start + width)
    if end < len(text):
        space = text.rfind(" ", end - 20, end)
        end = space if space > pos else end
    body = " ".join(text[start:end].split())
    return ("…" if start else "") + body + ("…" if end < len(text) else "")


def _word_start(word: str) -> str:
    # CJK bigrams sit inside runs of characters with no spaces: match them anywhere.
    if cjk.RUN.match(word):
        return re.escape(word)
    return r"(?<!\w)" + re.escape(word)


def _query_words(query: str) -> list[str]:
    return [w for w in re.split(r"\W+", query.lower()) if w]


_MD_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_MD_MARKS = re.compile(r"^#+\s*|\*\*|__|`", re.MULTILINE)


def _plain(markdown: str) -> str:
    """Markdown read as prose for a snippet: link text without its URL, no heading marks or
    emphasis markers."""
    return _MD_MARKS.sub("", _MD_LINK.sub(r"\1", markdown))


# -- the index ---------------------------------------------------------------------------------

@contextmanager
def _index_connection(index: Path | None) -> Iterator[duckdb.DuckDBPyConnection]:
    """The index's connection, under an flock so that searches of one index take turns; an index
    that cannot be opened costs speed, not the search: it is built in memory instead."""
    if index is None:
        with _opened(":memory:") as con:
            yield con
        return
    index = Path(index).expanduser()
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        lock = open(index.with_name(index.name + ".lock"), "a+")
    except OSError as exc:
        log.warning("cannot use the search index %s (%s); indexing in memory", index, exc)
        with _opened(":memory:") as con:
            yield con
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with _opened(str(index)) as con:
                yield con
        except _Unopenable as exc:
            log.warning("cannot open the search index %s (%s); indexing in memory; delete the "
                        "file if this persists", index, exc.__cause__)
            with _opened(":memory:") as con:
                yield con
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class _Unopenable(Exception):
    """The index file could not be opened (raised before the caller's block runs)."""


@contextmanager
def _opened(database: str) -> Iterator[duckdb.DuckDBPyConnection]:
    try:
        con = duckdb.connect(database)
    except duckdb.Error as exc:
        raise _Unopenable() from exc
    try:
        load_fts(con)  # for `stem`
        con.execute(_MACROS)
        yield con
    finally:
        con.close()


def _prepare(con: duckdb.DuckDBPyConnection, store: Path) -> None:
    """Tables in place; an index of another tokenizer or another store file starts over."""
    con.execute(_TABLES)
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    wanted = {"tokenizer": TOKENIZER, "store": str(store)}
    if meta != wanted:
        con.execute("DELETE FROM postings; DELETE FROM docs; DELETE FROM meta")
        con.executemany("INSERT INTO meta VALUES (?, ?)", list(wanted.items()))


def _catch_up(con: duckdb.DuckDBPyConnection, store: Path, lock_timeout: float,
              on_indexing: Callable[[int], None] | None) -> None:
    """Drop what left the store, tokenise what is new; one transaction, so a crash leaves the
    index as it was."""
    with attached_readonly(con, store, "rf_store", lock_timeout=lock_timeout):
        con.execute(_CURRENT)
        fresh = con.execute("SELECT count(*) FROM fresh").fetchone()[0]
        if fresh:  # the texts, copied while attached; tokenised once the store is let go
            con.execute(_STAGING)
    con.execute(_STALE)
    stale = con.execute("SELECT count(*) FROM stale").fetchone()[0]
    if fresh and on_indexing is not None:
        on_indexing(fresh)
    if fresh or stale:
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute("DELETE FROM postings WHERE doc_id IN (SELECT doc_id FROM stale)")
            con.execute("DELETE FROM docs WHERE doc_id IN (SELECT doc_id FROM stale)")
            if fresh:
                _tokenise(con)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    con.execute("DROP TABLE IF EXISTS staging; DROP TABLE IF EXISTS stale; "
                "DROP TABLE IF EXISTS fresh; DROP TABLE IF EXISTS current_docs")


def _tokenise(con: duckdb.DuckDBPyConnection) -> None:
    first = con.execute("SELECT coalesce(max(doc_id), 0) + 1 FROM docs").fetchone()[0]
    con.execute("CREATE OR REPLACE TEMP TABLE numbered AS SELECT ? + row_number() OVER "
                "(ORDER BY kind, key) - 1 AS doc_id, kind, key, stamp, body FROM staging",
                [first])
    last = con.execute("SELECT coalesce(max(doc_id), 0) FROM numbered").fetchone()[0]
    for lo in range(first, last + 1, _CHUNK):
        con.execute(_TOKENISE, [lo, lo + _CHUNK])
        # Sorted by term, each row group holds a narrow range of terms, so the scan of a search
        # skips almost all of them (measured: 0.4 s -> 0.01 s over 11M postings).
        con.execute("INSERT INTO postings SELECT * FROM chunk_postings ORDER BY term")
        con.execute(
            "INSERT INTO docs SELECT n.doc_id, n.kind, n.key, n.stamp, coalesce(l.len, 0) "
            "FROM numbered n LEFT JOIN (SELECT doc_id, sum(tf)::INTEGER AS len "
            "FROM chunk_postings GROUP BY doc_id) l USING (doc_id) "
            "WHERE n.doc_id >= ? AND n.doc_id < ?", [lo, lo + _CHUNK])
    con.execute("DROP TABLE IF EXISTS numbered; DROP TABLE IF EXISTS chunk_postings")


def _texts(con: duckdb.DuckDBPyConnection, store: Path, lock_timeout: float,
           ranked: list[tuple[str, str, float]]) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(kind, key) -> (what to show as key, title, text) for the ranked hits still stored."""
    reports = [key for kind, key, _ in ranked if kind == "report"]
    sources = [key for kind, key, _ in ranked if kind == "source"]
    with attached_readonly(con, store, "rf_store", lock_timeout=lock_timeout):
        rows = con.execute(
            "SELECT 'report', report_id, report_id, coalesce(title, ''), markdown "
            "FROM rf_store.reports WHERE list_contains(?::VARCHAR[], report_id) "
            "UNION ALL SELECT 'source', source_id, url, coalesce(title, ''), coalesce(text, '') "
            f"FROM {_LATEST_SOURCES} WHERE list_contains(?::VARCHAR[], source_id)",
            [reports, sources]).fetchall()
    return {(kind, key): (shown, title, text) for kind, key, shown, title, text in rows}

