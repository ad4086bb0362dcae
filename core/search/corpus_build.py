"""Writing a corpus index: files in, passages and two BM25 indexes out, incrementally.

`apply(db, root, on_disk, options)` brings the tables of an open, writable index up to date with
the files found on disk (path -> size, mtime):

- only new and changed files are extracted (core.search.corpus_extract); a file whose size or
  mtime moved but whose bytes hash the same only gets its stat updated; a file that cannot be
  indexed (unreadable, binary, ...: core.search.corpus_files) is recorded with its reason and no
  passages, so it is not read again until it changes;
- extraction runs in a process pool once there are enough files to pay for starting it (about
  a second to spawn workers that import trafilatura), with a bounded number of tasks in flight;
  each worker's address space is capped (WORKER_MEMORY: a file that would need more is skipped,
  "too large"); results are consumed in submission order and written `batch_size` files per
  transaction, so memory stays flat however large the corpus, the rows land in the same order
  as a serial run, and an interrupted build keeps its finished batches;
- files with the same content key (the same words once markup and whitespace are gone, e.g. a
  page as .html and as its .txt source) are indexed once: the smallest path is the
  representative, the others are recorded with `dup_of` and have no passages, and a duplicate is
  promoted when its representative goes away;
- the fts indexes are rebuilt (the extension can only build them whole) when anything changed:
  one over passages' title and body (English words, Porter-stemmed), one over the passages'
  CJK bigrams (core.text.cjk), which the word index cannot see: its tokeniser keeps only a-z.

What it does not do: decide when to index, lock, or read (core.search.corpus does).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import multiprocessing
import os
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import duckdb

from core.text.fts import load_fts
from core.models import Heading
from core.search.corpus_copies import near_copies
from core.search.corpus_extract import (Extraction, FileJob, Passages, extract_file,
                                        extract_files, passages)
from core.search.corpus_files import FileStat, ReadLimits

log = logging.getLogger(__name__)

# 2: content keys and duplicates, the CJK bigram index; 3: skipped files; 4: the documents'
# own headings (files.headings), indexed with each passage (passages.heads, head_grams); 5: names
# that open with digits (2to3) in the exact-term index; 6: sections trafilatura dropped restored;
# 7: headings placed by their own lines, not cross-references; 8: nor by table captions;
# 9: the chapter a page belongs to (its "up" link) as its outermost heading; 10: restored sections
# in their place; 11: and only those that say something (not a navigation bar); 12: a section
# whose sentence sits over a table of links (package names) is restored too
SCHEMA_VERSION = "12"
PARALLEL_MIN = 48  # fewer files to extract than this: in-process beats spawning workers
_TASK_FILES = 8  # files per worker task: fewer, larger messages
# The address space a worker may use: a second line of defence behind each reader's own caps
# (a file that would need more is skipped, "too large", instead of swapping the machine).
# A worker holds ~100 MB of virtual memory once its readers are imported.
WORKER_MEMORY = 2_000_000_000
_IN_FLIGHT = 4  # tasks queued per worker: keeps workers busy, bounds memory


@dataclass(frozen=True)
class BuildOptions:
    passage_chars: int
    workers: int = 1
    batch_size: int = 256
    limits: ReadLimits = ReadLimits()


@dataclass(frozen=True)
class Applied:
    extracted: int
    removed: int
    rebuilt: bool
    duplicates: int


def default_workers() -> int:
    return max(1, min(4, len(os.sched_getaffinity(0))))


def open_db(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    db = duckdb.connect(str(path), read_only=read_only)
    try:
        load_fts(db)
    except BaseException:
        db.close()
        raise
    return db


class IndexLock:
    """An exclusive flock on `<index>.lock`, so only one process updates an index at a time."""

    def __init__(self, index_path: Path) -> None:
        self._path = index_path.with_name(index_path.name + ".lock")
        self._fh = None

    def __enter__(self) -> "IndexLock":
        self._fh = open(self._path, "a+")
        fcntl.flock(self._fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


def known_files(cur: duckdb.DuckDBPyConnection, passage_chars: int
                ) -> dict[str, tuple[int, int, str]] | None:
    """path -> (size, mtime_ns, sha256) of a complete index of this schema, else None (missing,
    foreign, old, other passage size, or a build that did not finish)."""
    try:
        meta = dict(cur.execute("SELECT key, value FROM meta").fetchall())
        if (meta.get("schema") != SCHEMA_VERSION or meta.get("fts") != "1"
                or meta.get("passage_chars") != str(passage_chars)):
            return None
        rows = cur.execute("SELECT path, size, mtime_ns, sha256 FROM files").fetchall()
    except duckdb.Error:
        return None
    return {p: (s, m, h) for p, s, m, h in rows}


def apply(db: duckdb.DuckDBPyConnection, root: Path, on_disk: dict[str, FileStat],
          options: BuildOptions) -> Applied:
    """Bring the index in `db` up to date with `on_disk` (see module docstring)."""
    _create_schema(db, options.passage_chars)
    known = {p: (s, m, h) for p, s, m, h in db.execute(
        "SELECT path, size, mtime_ns, sha256 FROM files").fetchall()}
    fts_ready = _meta(db).get("fts") == "1"
    removed = [p for p in known if p not in on_disk]
    jobs = [FileJob(rel, st.size, st.mtime_ns, known[rel][2] if rel in known else None)
            for rel, st in on_disk.items()
            if rel not in known or known[rel][:2] != (st.size, st.mtime_ns)]
    if removed or jobs:
        # Until the fts indexes are rebuilt they describe other rows: a crash from here on
        # leaves an index that the next run finishes instead of trusting.
        db.execute("INSERT OR REPLACE INTO meta VALUES ('fts', '0')")
    with _transaction(db):
        _delete(db, removed)
    written = skipped = 0
    batch: list[Extraction] = []
    for result in _extractions(root, jobs, options):
        batch.append(result)
        skipped += result.skipped is not None
        if len(batch) >= options.batch_size:
            written += _write(db, batch, known, options.passage_chars)
            batch = []
    written += _write(db, batch, known, options.passage_chars)
    extracted = written - skipped
    with _transaction(db):
        relinked = _reconcile(db, options.passage_chars)
    rebuild = bool(removed or written or relinked or not fts_ready)
    if rebuild:
        _find_boilerplate(db)
        _build_fts(db)
    db.execute("CHECKPOINT")
    duplicates = db.execute("SELECT count(*) FROM files WHERE dup_of IS NOT NULL").fetchone()[0]
    return Applied(extracted, len(removed), rebuild, duplicates)


# ---- extraction, in order, maybe in parallel ---------------------------------------------------

def _extractions(root: Path, jobs: list[FileJob], options: BuildOptions
                 ) -> Iterator[Extraction]:
    pool = None
    if options.workers > 1 and len(jobs) >= PARALLEL_MIN:
        pool = _pool(options.workers)
    if pool is None:
        for job in jobs:
            yield extract_file(root, job, options.passage_chars, options.limits)
        return
    tasks = (jobs[i:i + _TASK_FILES] for i in range(0, len(jobs), _TASK_FILES))
    window: deque[Future[list[Extraction]]] = deque()
    try:
        for task in islice(tasks, options.workers * _IN_FLIGHT):
            window.append(pool.submit(extract_files, str(root), task, options.passage_chars,
                                      options.limits))
        while window:
            # In submission order: the same rows, in the same order, as a serial run.
            done = window.popleft().result()
            task = next(tasks, None)
            if task is not None:
                window.append(pool.submit(extract_files, str(root), task,
                                          options.passage_chars, options.limits))
            yield from done
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _pool(workers: int) -> ProcessPoolExecutor | None:
    if multiprocessing.current_process().daemon:  # e.g. inside a pool worker: no children
        return None
    try:
        # spawn, not fork: the parent holds DuckDB's and maybe Prefect's threads and locks.
        return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=limit_memory, initargs=(WORKER_MEMORY,))
    except (OSError, ValueError, RuntimeError) as exc:
        log.warning("extracting the corpus in-process: no worker pool (%s)", exc)
        return None


def limit_memory(limit: int) -> None:
    """Cap this (worker) process's address space at `limit` bytes (never raising a lower cap
    already set): past it an allocation fails with MemoryError, which extract_file turns into
    a skipped file."""
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError) as exc:  # not permitted here: the readers' caps still hold
        log.warning("corpus workers run without a memory cap (%s)", exc)


# ---- rows --------------------------------------------------------------------------------------

def _write(db: duckdb.DuckDBPyConnection, batch: list[Extraction], known: dict[str, object],
           passage_chars: int) -> int:
    """Store one batch in one transaction; the number of files written (not just touched)."""
    if not batch:
        return 0
    fresh = [e for e in batch if not e.unchanged]
    with _transaction(db):
        for e in batch:
            if e.unchanged:
                db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                           [e.size, e.mtime_ns, e.rel])
        if not fresh:
            return 0
        _delete(db, [e.rel for e in fresh if e.rel in known])  # new files have no old rows
        # One INSERT per table and batch (see _insert): far faster than a row at a time.
        _insert(db, "files", {
            "path": ("VARCHAR", [e.rel for e in fresh]),
            "size": ("BIGINT", [e.size for e in fresh]),
            "mtime_ns": ("BIGINT", [e.mtime_ns for e in fresh]),
            "sha256": ("VARCHAR", [e.sha256 for e in fresh]),
            "content_key": ("VARCHAR", [e.content_key for e in fresh]),
            "title": ("VARCHAR", [e.title for e in fresh]),
            "text": ("VARCHAR", [e.text for e in fresh]),
            "skipped": ("VARCHAR", [e.skipped for e in fresh]),
            "headings": ("VARCHAR", [_headings_json(e.headings) for e in fresh]),
            "sketch": (["BIGINT"], [list(e.sketch) for e in fresh])})
        keys = [e.content_key for e in fresh if e.content_key is not None]
        first = dict(db.execute(f"SELECT content_key, min(path) FROM files WHERE content_key IN "
                                f"{_JSON_STRINGS} GROUP BY ALL", [json.dumps(keys)]).fetchall())
        # A twin of a smaller path gets no passages now (_reconcile settles the rest).
        _insert_passages(db, [(e.rel, e.title, e.text, Passages(e.spans, e.grams, e.heads,
                                                                   e.head_grams))
                              for e in fresh
                              if e.content_key is None or first[e.content_key] == e.rel])
    return len(fresh)


def skip_counts(cur: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """reason -> files the index records as skipped."""
    try:
        return dict(cur.execute("SELECT skipped, count(*) FROM files WHERE skipped IS NOT NULL "
                                "GROUP BY ALL").fetchall())
    except duckdb.Error:
        return {}


def _insert_passages(db: duckdb.DuckDBPyConnection,
                     docs: list[tuple[str, str, str, Passages]]) -> None:
    rows: dict[str, list] = {k: [] for k in ("ids", "paths", "ords", "starts", "stops", "titles",
                                             "heads", "bodies", "gram_ids", "grams", "hgrams")}
    for rel, title, text, cut in docs:
        for i, ((a, b), g, h, hg) in enumerate(zip(cut.spans, cut.grams, cut.heads,
                                                   cut.head_grams)):
            pid = f"{rel}#p{i}"
            for key, value in (("ids", pid), ("paths", rel), ("ords", i), ("starts", a),
                               ("stops", b), ("titles", title), ("heads", h),
                               ("bodies", text[a:b])):
                rows[key].append(value)
            if g or hg:
                rows["gram_ids"].append(pid)
                rows["grams"].append(g)
                rows["hgrams"].append(hg)
    if rows["ids"]:
        _insert(db, "passages", {
            "passage_id": ("VARCHAR", rows["ids"]), "path": ("VARCHAR", rows["paths"]),
            "ord": ("INTEGER", rows["ords"]), "start": ("INTEGER", rows["starts"]),
            "stop": ("INTEGER", rows["stops"]), "title": ("VARCHAR", rows["titles"]),
            "heads": ("VARCHAR", rows["heads"]), "body": ("VARCHAR", rows["bodies"])})
    if rows["gram_ids"]:
        _insert(db, "passage_grams", {"passage_id": ("VARCHAR", rows["gram_ids"]),
                                      "grams": ("VARCHAR", rows["grams"]),
                                      "head_grams": ("VARCHAR", rows["hgrams"])})


def _headings_json(headings: tuple[Heading, ...]) -> str:
    return json.dumps([[h.start, h.level, h.text] for h in headings], ensure_ascii=False)


def stored_headings(raw: str | None) -> tuple[Heading, ...]:
    """The headings a `files.headings` value holds."""
    try:
        return tuple(Heading(start=a, level=lv, text=t) for a, lv, t in json.loads(raw or "[]"))
    except (ValueError, TypeError):
        return ()


# DuckDB turns a Python list parameter into SQL values one by one, trying to import pandas for
# each (measured: 10x the CPU of the whole insert); one JSON string crosses as one value.
_JSON_STRINGS = "(SELECT unnest(json_transform(?, '[\"VARCHAR\"]')))"


def _insert(db: duckdb.DuckDBPyConnection, table: str, columns: dict[str, tuple[object, list]]
            ) -> None:
    """INSERT rows given column by column as {name: (SQL type, values)}; a list column's type
    is given as a one-element list (["BIGINT"])."""
    shape = json.dumps({name: [sql_type] for name, (sql_type, _) in columns.items()})
    payload = json.dumps({name: values for name, (_, values) in columns.items()},
                         ensure_ascii=False)
    names = ", ".join(columns)  # our own identifiers, never input
    db.execute(f"INSERT INTO {table} ({names}) SELECT "
               + ", ".join(f"unnest(j.{name})" for name in columns)
               + f" FROM (SELECT json_transform(?, '{shape}') AS j)", [payload])


def _delete(db: duckdb.DuckDBPyConnection, rels: list[str]) -> None:
    if not rels:
        return
    _drop_passages(db, rels)
    db.execute(f"DELETE FROM files WHERE path IN {_JSON_STRINGS}", [json.dumps(rels)])


def _drop_passages(db: duckdb.DuckDBPyConnection, rels: list[str]) -> None:
    db.execute(f"DELETE FROM passage_grams WHERE passage_id IN (SELECT passage_id FROM passages "
               f"WHERE path IN {_JSON_STRINGS})", [json.dumps(rels)])
    db.execute(f"DELETE FROM passages WHERE path IN {_JSON_STRINGS}", [json.dumps(rels)])


# Each file's representative, if it is not one: an exact twin (the same words: core.search.
# corpus_extract.content_key) goes to the smallest path; a near copy to the copy
# core.search.corpus_copies keeps.
_TWINS = """
CREATE OR REPLACE TEMP TABLE twins AS
SELECT path, min(path) OVER (PARTITION BY content_key) AS twin_of FROM files
WHERE content_key IS NOT NULL AND skipped IS NULL
QUALIFY min(path) OVER (PARTITION BY content_key) <> path
"""


def _reconcile(db: duckdb.DuckDBPyConnection, passage_chars: int) -> int:
    """Give passages to exactly the representatives and record every duplicate's `dup_of`;
    return how many files changed role."""
    db.execute(_TWINS)
    copies = near_copies(db)
    db.execute("CREATE OR REPLACE TEMP TABLE copies (path VARCHAR, rep VARCHAR)")
    if copies:
        _insert(db, "copies", {"path": ("VARCHAR", list(copies)),
                               "rep": ("VARCHAR", list(copies.values()))})
    db.execute("CREATE OR REPLACE TEMP TABLE roles AS SELECT f.path, "
               "coalesce(t.twin_of, c.rep) AS twin_of FROM files f "
               "LEFT JOIN twins t USING (path) LEFT JOIN copies c USING (path)")
    db.execute("DROP TABLE twins")
    db.execute("DROP TABLE copies")
    demoted = [r[0] for r in db.execute(
        "SELECT DISTINCT p.path FROM passages p JOIN roles r USING (path) "
        "WHERE r.twin_of IS NOT NULL ORDER BY 1").fetchall()]
    if demoted:
        _drop_passages(db, demoted)
    promoted = db.execute(
        "SELECT f.path, f.title, f.text, f.headings FROM files f JOIN roles r USING (path) "
        "WHERE r.twin_of IS NULL AND f.dup_of IS NOT NULL ORDER BY f.path").fetchall()
    _insert_passages(db, [(rel, title, text, passages(title, text, passage_chars,
                                                      stored_headings(heads)))
                          for rel, title, text, heads in promoted])
    db.execute("UPDATE files SET dup_of = r.twin_of FROM roles r "
               "WHERE r.path = files.path AND files.dup_of IS DISTINCT FROM r.twin_of")
    db.execute("DROP TABLE roles")
    return len(demoted) + len(promoted)


# A line (of 30 characters or more, compared case- and space-insensitively) that recurs in
# this many of the indexed files is the corpus's boilerplate (a generator's notice, a footer):
# core.search.corpus marks it in what it reads, and it is never quoted.
BOILERPLATE_FILES, BOILERPLATE_SHARE = 3, 0.05
BOILERPLATE_LINE = """lower(trim(regexp_replace(line, '\\s+', ' ', 'g')))"""


def boilerplate_spans(text: str, hashes: set[str]) -> tuple[tuple[int, int], ...]:
    """(start, stop) of each line of `text` whose hash is one of the corpus's boilerplate
    lines (the same normalisation as BOILERPLATE_LINE: whitespace runs as one space, trimmed,
    lower case)."""
    out, at = [], 0
    for line in text.split("\n"):
        seen = _RE2_SPACE.sub(" ", line).strip(" ").lower()
        if len(seen) >= 30 and hashlib.md5(seen.encode("utf-8")).hexdigest() in hashes:
            out.append((at, at + len(line)))
        at += len(line) + 1
    return tuple(out)


_RE2_SPACE = re.compile(r"[\t\n\f\r ]+")  # what DuckDB's regular expressions call \s


def _find_boilerplate(db: duckdb.DuckDBPyConnection) -> None:
    with _transaction(db):
        db.execute("DELETE FROM boilerplate")
        db.execute(f"""
            INSERT INTO boilerplate
            WITH lines AS (
                SELECT DISTINCT f.path, md5({BOILERPLATE_LINE}) AS h
                FROM files f, unnest(string_split(f.text, chr(10))) AS l(line)
                WHERE f.dup_of IS NULL AND f.skipped IS NULL AND length({BOILERPLATE_LINE}) >= 30)
            SELECT h FROM lines GROUP BY h
            HAVING count(*) >= greatest({BOILERPLATE_FILES}, {BOILERPLATE_SHARE} * (
                SELECT count(*) FROM files WHERE dup_of IS NULL AND skipped IS NULL))""")


def _build_fts(db: duckdb.DuckDBPyConnection) -> None:
    # Fields, in this order (core.search.corpus_vocab reads them by number): the page's title,
    # the headings over and in the passage, its body.
    # Latin words only ([a-z] after lower-casing and stripping accents): the default keeps any
    # letter, so "应用。PostgreSQL" was one token and a name in Chinese text was never found.
    # Han text has its own index, of bigrams, below.
    db.execute("PRAGMA create_fts_index('passages', 'passage_id', 'title', 'heads', 'body', "
               "ignore='(\\.|[^a-z])+', overwrite=1)")
    # Bigrams are already the terms: split on spaces only, no stemming, stop words or case.
    db.execute("PRAGMA create_fts_index('passage_grams', 'passage_id', 'grams', 'head_grams', "
               "stemmer='none', stopwords='none', ignore='\\s+', strip_accents=0, lower=0, "
               "overwrite=1)")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('fts', '1')")


# ---- schema ------------------------------------------------------------------------------------

def _meta(db: duckdb.DuckDBPyConnection) -> dict[str, str]:
    try:
        return dict(db.execute("SELECT key, value FROM meta").fetchall())
    except duckdb.Error:
        return {}


def _create_schema(db: duckdb.DuckDBPyConnection, passage_chars: int) -> None:
    meta = _meta(db)
    if (meta.get("schema") != SCHEMA_VERSION
            or meta.get("passage_chars") != str(passage_chars)):  # new or incompatible: redo
        for table in ("boilerplate", "passage_grams", "passages", "files", "meta"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
    db.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    db.execute("CREATE TABLE IF NOT EXISTS files (path VARCHAR PRIMARY KEY, size BIGINT, "
               "mtime_ns BIGINT, sha256 VARCHAR, content_key VARCHAR, title VARCHAR, "
               "text VARCHAR, dup_of VARCHAR, skipped VARCHAR, headings VARCHAR, "
               "sketch BIGINT[])")
    db.execute("CREATE TABLE IF NOT EXISTS boilerplate (h VARCHAR PRIMARY KEY)")
    db.execute("CREATE TABLE IF NOT EXISTS passages (passage_id VARCHAR PRIMARY KEY, "
               "path VARCHAR, ord INTEGER, start INTEGER, stop INTEGER, title VARCHAR, "
               "heads VARCHAR, body VARCHAR)")
    db.execute("CREATE TABLE IF NOT EXISTS passage_grams (passage_id VARCHAR PRIMARY KEY, "
               "grams VARCHAR, head_grams VARCHAR)")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?), ('passage_chars', ?)",
               [SCHEMA_VERSION, str(passage_chars)])


class _transaction:
    """BEGIN ... COMMIT, or ROLLBACK when the block raises."""

    def __init__(self, db: duckdb.DuckDBPyConnection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, kind: object, *rest: object) -> None:
        self._db.execute("ROLLBACK" if kind is not None else "COMMIT")
