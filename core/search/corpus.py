"""A local folder as a search engine: BM25 full-text search over a DuckDB index.

`CorpusSearch(corpus_dir, index_path)` indexes every .html/.htm/.md/.txt file under corpus_dir
(recursively, skipping hidden entries) into a DuckDB file, then answers queries with the `fts`
extension's BM25. Documents are cut into passages of about 1.5k characters for ranking; a search
returns the best passage of each matching document (so k results are k different documents),
shaped like a web hit: url = the file's URI plus "#p<n>" naming the passage, the title, and the
best-matching sentence of the passage as snippet.

`read(result)` returns the document's extracted text when it fits in `read_chars`, else a window
of whole passages around the hit passage. Either way Source.text is a verbatim slice of the
document, and the snippet is a verbatim slice of Source.text.

Indexing is incremental: a table keeps (path, size, mtime_ns, sha256) per file; only new or
changed files are extracted, removed ones are deleted, and the fts index is rebuilt only when
something changed. An unchanged corpus is checked through a read-only connection and costs a
`stat` per file. The index is built lazily on the first search.

Concurrency: DuckDB allows one writing process per file. Writes happen under a per-path thread
lock plus an flock on a sidecar lock file; searching uses a read-only connection (so other
processes may search the same index) with a cursor per call (so threads may search at once).
If the index is held by another process and cannot be updated, the existing index is used as is.

The fts extension is loaded offline by core.fts, from the file the pinned `duckdb-extension-fts`
package ships (plain `INSTALL fts` downloads, which fails offline).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import duckdb

from core.fts import fts_extension_path, load_fts
from core.models import SearchResult, Source
from core.search import text as textlib

log = logging.getLogger(__name__)

EXTENSIONS = frozenset({".html", ".htm", ".md", ".txt"})
SCHEMA_VERSION = "1"
_MAX_QUERY_TERMS = 32


@dataclass(frozen=True)
class IndexStats:
    files: int
    extracted: int
    removed: int
    rebuilt: bool
    seconds: float
    stale: bool = False  # changes were found but another process held the index


@dataclass(frozen=True)
class _Stat:
    size: int
    mtime_ns: int


class CorpusSearch:
    """BM25 search over a local folder of documents (see module docstring)."""

    name = "corpus"

    def __init__(self, corpus_dir: Path, index_path: Path, *, read_chars: int = 20_000,
                 passage_chars: int = 1500, max_file_bytes: int = 20_000_000) -> None:
        self.corpus_dir = Path(corpus_dir).resolve()
        self.index_path = Path(index_path)
        self.read_chars = read_chars
        self.passage_chars = passage_chars
        self.max_file_bytes = max_file_bytes
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()  # guards _conn swaps and lazy indexing
        self._readers = 0
        self._idle = threading.Condition(self._lock)
        self.last_stats: IndexStats | None = None

    # ---- public API -------------------------------------------------------------------------

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        terms = textlib.query_terms(query)[:_MAX_QUERY_TERMS]
        if not terms or k <= 0:
            return []
        rows = self._query(
            """SELECT path, ord, title, body, score FROM (
                   SELECT path, ord, title, body,
                          fts_main_passages.match_bm25(passage_id, ?) AS score
                   FROM passages) AS hits
               WHERE score IS NOT NULL
               QUALIFY row_number() OVER (PARTITION BY path ORDER BY score DESC, ord) = 1
               ORDER BY score DESC, path LIMIT ?""", [" ".join(terms), k])
        return [SearchResult(url=self._url(path, ord_), title=title or Path(path).stem,
                             snippet=textlib.best_sentence(body, query), rank=i)
                for i, (path, ord_, title, body, _score) in enumerate(rows, start=1)]

    def read(self, result: SearchResult) -> Source | None:
        located = self._locate(result.url)
        if located is None:
            return None
        path, ord_ = located
        docs = self._query("SELECT title, text FROM files WHERE path = ?", [path])
        if not docs or not docs[0][1]:
            return None
        title, text = docs[0]
        spans = self._query("SELECT start, stop FROM passages WHERE path = ? ORDER BY ord", [path])
        start, stop = _window(text, [tuple(s) for s in spans], ord_, self.read_chars)
        # The whole document is one source whichever passage found it; a window keeps its #pN.
        url = result.url.split("#", 1)[0] if (start, stop) == (0, len(text)) else result.url
        return Source(url=url, title=title or result.title, text=text[start:stop])

    def index(self) -> IndexStats:
        """Bring the index up to date with the folder; cheap when nothing changed."""
        with self._lock:
            while self._readers:
                self._idle.wait()
            return self._index_locked()

    def close(self) -> None:
        with self._lock:
            while self._readers:
                self._idle.wait()
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self.last_stats = None  # a later search reopens (and re-checks) the index

    # ---- indexing ---------------------------------------------------------------------------

    def _index_locked(self) -> IndexStats:
        began = time.perf_counter()
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        with IndexLock(self.index_path):
            on_disk = self._scan()
            if self._conn is None and self.index_path.exists():
                self._conn = self._try_open(read_only=True)
            known = self._known() if self._conn is not None else None
            if known is not None:
                changed = [p for p, st in on_disk.items()
                           if p not in known or known[p][:2] != (st.size, st.mtime_ns)]
                removed = [p for p in known if p not in on_disk]
                if not changed and not removed:
                    return self._done(len(on_disk), 0, 0, False, began)
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            try:
                writer = open_db(self.index_path, read_only=False)
            except duckdb.Error as exc:
                if not self.index_path.exists():
                    raise
                log.warning("corpus index %s is busy (%s); searching the existing index",
                            self.index_path, exc)
                self._conn = self._try_open(read_only=True)
                return self._done(len(on_disk), 0, 0, False, began, stale=True)
            try:
                extracted, removed_n, rebuilt = self._apply(writer, on_disk)
            finally:
                writer.close()
            self._conn = self._try_open(read_only=True)
            return self._done(len(on_disk), extracted, removed_n, rebuilt, began)

    def _done(self, files: int, extracted: int, removed: int, rebuilt: bool,
              began: float, stale: bool = False) -> IndexStats:
        self.last_stats = IndexStats(files, extracted, removed, rebuilt,
                                     time.perf_counter() - began, stale)
        return self.last_stats

    def _scan(self) -> dict[str, _Stat]:
        found: dict[str, _Stat] = {}
        for path in sorted(self.corpus_dir.rglob("*")):
            rel = path.relative_to(self.corpus_dir)
            if any(part.startswith(".") for part in rel.parts):
                continue
            if path.suffix.lower() not in EXTENSIONS or not path.is_file():
                continue
            st = path.stat()
            if st.st_size <= self.max_file_bytes:
                found[rel.as_posix()] = _Stat(st.st_size, st.st_mtime_ns)
        return found

    def _known(self) -> dict[str, tuple[int, int, str]] | None:
        """The files table, or None when the index is missing, foreign or from an old schema."""
        try:
            cur = self._conn.cursor()
            meta = dict(cur.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("schema") != SCHEMA_VERSION or meta.get("passage_chars") != str(
                    self.passage_chars) or meta.get("fts") != "1":
                return None
            rows = cur.execute("SELECT path, size, mtime_ns, sha256 FROM files").fetchall()
        except duckdb.Error:
            return None
        return {p: (s, m, h) for p, s, m, h in rows}

    def _apply(self, db: duckdb.DuckDBPyConnection, on_disk: dict[str, _Stat]
               ) -> tuple[int, int, bool]:
        _create_schema(db, self.passage_chars)
        known = {p: (s, m, h) for p, s, m, h in db.execute(
            "SELECT path, size, mtime_ns, sha256 FROM files").fetchall()}
        fts_ready = dict(db.execute("SELECT key, value FROM meta").fetchall()).get("fts") == "1"
        removed = [p for p in known if p not in on_disk]
        extracted = 0
        content_changed = bool(removed)
        db.execute("BEGIN")
        try:
            for rel in removed:
                db.execute("DELETE FROM passages WHERE path = ?", [rel])
                db.execute("DELETE FROM files WHERE path = ?", [rel])
            for rel, st in on_disk.items():
                old = known.get(rel)
                if old is not None and old[:2] == (st.size, st.mtime_ns):
                    continue
                raw = (self.corpus_dir / rel).read_bytes()
                digest = hashlib.sha256(raw).hexdigest()
                if old is not None and old[2] == digest:  # touched, not changed
                    db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?",
                               [st.size, st.mtime_ns, rel])
                    continue
                self._store(db, rel, st, digest, raw)
                extracted += 1
                content_changed = True
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        rebuild = content_changed or not fts_ready
        if rebuild:
            db.execute("PRAGMA create_fts_index('passages', 'passage_id', 'title', 'body', "
                       "overwrite=1)")
            db.execute("INSERT OR REPLACE INTO meta VALUES ('fts', '1')")
        db.execute("CHECKPOINT")
        return extracted, len(removed), rebuild

    def _store(self, db: duckdb.DuckDBPyConnection, rel: str, st: _Stat, digest: str,
               raw: bytes) -> None:
        title, body = _extract(rel, raw)
        spans = textlib.split_passages(body, target=self.passage_chars,
                                       hard_max=2 * self.passage_chars)
        db.execute("DELETE FROM passages WHERE path = ?", [rel])
        db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)",
                   [rel, st.size, st.mtime_ns, digest, title, body])
        if spans:
            # One INSERT from unnested lists: far faster than executemany for thousands of rows.
            db.execute(
                "INSERT INTO passages SELECT unnest(?), ?, unnest(?), unnest(?), unnest(?), ?, "
                "unnest(?)",
                [[f"{rel}#p{i}" for i in range(len(spans))], rel, list(range(len(spans))),
                 [a for a, _ in spans], [b for _, b in spans], title,
                 [body[a:b] for a, b in spans]])

    # ---- reading ----------------------------------------------------------------------------

    def _query(self, sql: str, params: list) -> list[tuple]:
        self._ensure_index()
        with self._lock:
            if self._conn is None:
                return []
            cur = self._conn.cursor()  # a cursor per call: threads may search at once
            self._readers += 1
        try:
            return cur.execute(sql, params).fetchall()
        finally:
            cur.close()
            with self._lock:
                self._readers -= 1
                self._idle.notify_all()

    def _ensure_index(self) -> None:
        if self.last_stats is None:
            with self._lock:
                while self._readers:
                    self._idle.wait()
                if self.last_stats is None:
                    self._index_locked()

    def _try_open(self, read_only: bool) -> duckdb.DuckDBPyConnection | None:
        try:
            return open_db(self.index_path, read_only=read_only)
        except duckdb.Error as exc:
            log.warning("cannot open corpus index %s: %s", self.index_path, exc)
            return None

    def _url(self, path: str, ord_: int) -> str:
        return f"{(self.corpus_dir / path).as_uri()}#p{ord_}"

    def _locate(self, url: str) -> tuple[str, int] | None:
        parts = urlsplit(url)
        if parts.scheme != "file":
            return None
        try:
            rel = Path(unquote(parts.path)).relative_to(self.corpus_dir).as_posix()
        except ValueError:
            return None
        match = re.fullmatch(r"p(\d+)", parts.fragment)
        return rel, int(match.group(1)) if match else 0


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


def _create_schema(db: duckdb.DuckDBPyConnection, passage_chars: int) -> None:
    meta_ok = False
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        meta_ok = (meta.get("schema") == SCHEMA_VERSION
                   and meta.get("passage_chars") == str(passage_chars))
    except duckdb.Error:
        pass
    if not meta_ok:  # a new or incompatible index: start it over
        for table in ("passages", "files", "meta"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
    db.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    db.execute("CREATE TABLE IF NOT EXISTS files (path VARCHAR PRIMARY KEY, size BIGINT, "
               "mtime_ns BIGINT, sha256 VARCHAR, title VARCHAR, text VARCHAR)")
    db.execute("CREATE TABLE IF NOT EXISTS passages (passage_id VARCHAR PRIMARY KEY, "
               "path VARCHAR, ord INTEGER, start INTEGER, stop INTEGER, title VARCHAR, "
               "body VARCHAR)")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?), ('passage_chars', ?)",
               [SCHEMA_VERSION, str(passage_chars)])


def _extract(rel: str, raw: bytes) -> tuple[str, str]:
    """(title, text) of one corpus file; ('', '') when an HTML page has no main text."""
    if rel.lower().endswith((".html", ".htm")):
        page = textlib.extract_html(textlib.decode_body(raw), url=None)
        return (page.title or Path(rel).stem, page.text) if page else (Path(rel).stem, "")
    body = textlib.decode_body(raw)
    return textlib.first_line_title(body) or Path(rel).stem, body


def _window(text: str, spans: list[tuple[int, int]], hit: int, budget: int) -> tuple[int, int]:
    """Offsets of the whole document if it fits in budget, else of whole passages grown
    around passage `hit`, alternating after and before, while they fit."""
    if len(text) <= budget or not spans:
        return 0, min(len(text), budget)
    hit = min(max(hit, 0), len(spans) - 1)
    lo = hi = hit
    start, stop = spans[hit]
    grew = True
    while grew:
        grew = False
        if hi + 1 < len(spans) and spans[hi + 1][1] - start <= budget:
            hi += 1
            stop = spans[hi][1]
            grew = True
        if lo > 0 and stop - spans[lo - 1][0] <= budget:
            lo -= 1
            start = spans[lo][0]
            grew = True
    return start, stop


__all__ = ["CorpusSearch", "IndexStats", "EXTENSIONS", "fts_extension_path"]
