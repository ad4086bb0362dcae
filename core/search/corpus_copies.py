"""Near copies among a corpus's files: the same page twice, in other markup or another folder.

    near_copies(db) -> {path: representative}

A manual's .html beside its text source, or a mirrored folder with its own footer, is one page:
indexed, searched and quoted once, and never three witnesses nor three pages of "boilerplate".
Exact twins (the same words) are found by their content key when they are written
(core.search.corpus_build); near copies by their sketches (core.search.corpus_extract.sketch: a
sample of five-word shingles). Two files are copies when:
- most of the larger sketch is shared (shingles that recur in many files, boilerplate, aside);
- they are about as long (a page that holds another, as a package's manual holds its modules',
  is no copy of it);
- their titles share most of their words (a module's page that repeats another's docs under its
  own name is its own page).
Copies are grouped (a copy of a copy is the same page) and each group keeps the file a reader
would rather quote: HTML or markdown, then a document, then plain text; then the shortest path.
"""

from __future__ import annotations

import re

import duckdb

MIN_SHINGLES = 8  # a file sampled to fewer shingles is too short to call a copy
MAX_FILES = 20  # a shingle in more files than this is boilerplate, not a sign of a copy
SHARE = 0.6  # of the larger sketch, shared
SIZE = 0.75  # the smaller sketch's size, at least, as a share of the larger's
TITLE = 0.5  # of the shorter title's words, shared

_PAIRS = f"""
WITH ranked AS (
    SELECT path, title, sketch FROM files
    WHERE skipped IS NULL AND len(coalesce(sketch, [])) >= {MIN_SHINGLES}
      AND path NOT IN (SELECT path FROM twins)),
shingles AS (SELECT path, unnest(sketch) AS h FROM ranked),
rare AS (SELECT h FROM shingles GROUP BY h HAVING count(*) <= {MAX_FILES}),
shared AS (
    SELECT a.path AS a, b.path AS b, count(*) AS n
    FROM shingles a JOIN shingles b ON a.h = b.h AND a.path < b.path
    WHERE a.h IN (SELECT h FROM rare) GROUP BY ALL)
SELECT s.a, s.b, s.n, len(ra.sketch), len(rb.sketch), ra.title, rb.title
FROM shared s JOIN ranked ra ON ra.path = s.a JOIN ranked rb ON rb.path = s.b
"""
_WORD = re.compile(r"[^\W_]+")
_ROLE = re.compile(r":[\w-]+:`")
_SMALL = frozenset("a an and the of to in for on with by".split())


def near_copies(db: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """path -> the file it is a near copy of, for every near copy; needs a temp table `twins`
    listing the files already known as exact twins."""
    parent: dict[str, str] = {}

    def root(path: str) -> str:
        while parent.get(path, path) != path:
            path = parent[path]
        return path

    for a, b, shared, la, lb, ta, tb in db.execute(_PAIRS).fetchall():
        big, small = max(la, lb), min(la, lb)
        if shared >= SHARE * big and small >= SIZE * big and _same_title(ta or "", tb or ""):
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb, key=_preference)] = min(ra, rb, key=_preference)
    return {path: root(path) for path in parent}


def _preference(path: str) -> tuple[int, int, str]:
    lowered = path.lower()
    kind = 0 if lowered.endswith((".html", ".htm", ".md")) else 2 if lowered.endswith(".txt") \
        else 1
    return kind, len(path), path


def _same_title(a: str, b: str) -> bool:
    wa, wb = _title_words(a), _title_words(b)
    if not wa or not wb:
        return True  # a file without a title: its words decide
    return len(wa & wb) >= TITLE * min(len(wa), len(wb))


def _title_words(title: str) -> set[str]:
    return {w for w in _WORD.findall(_ROLE.sub("", title).casefold()) if w not in _SMALL}
