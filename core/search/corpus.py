"""A local folder as a search engine: hybrid BM25 + embedding search over a DuckDB index.

`CorpusSearch(corpus_dir, index_path)` indexes every .html/.htm/.md/.txt, .pdf, .docx and .pptx
file under corpus_dir (recursively, skipping hidden entries) into a DuckDB file, then answers
queries. The folder is untrusted: a file that cannot or may not be indexed (unreadable, a symlink
out of the folder, too deep, too large, binary, undecodable: core.search.corpus_files) is
skipped, counted and reported once per index build ("indexed 240, skipped 3: 1 unreadable, ..."),
never an error. Documents are
cut into passages of about 1.5k characters; BM25 (the `fts` extension) over their words, and over
the character bigrams of any Chinese, Japanese or Korean text, picks candidates, which the shared
offline embedder re-ranks by meaning (core.search.corpus_rank). A search returns the best passage
of each matching document (so k results are k different documents), shaped like a web hit: url =
the file's URI plus "#p<n>" naming the passage, the title, and the best-matching sentence of the
passage as snippet. A PDF's hit names its page instead ("#page=3", a deck's "#slide=3").

`read(result)` returns the document's extracted text when it fits in `read_chars`, else a window
of whole passages around the hit passage; for a PDF or a deck, the page (slide) the hit names,
as a source of its own (its URL keeps "#page=N", so a citation names the page). Either way
Source.text is a verbatim slice of the document, and the snippet is a verbatim slice of
Source.text.

Indexing is incremental: a table keeps (path, size, mtime_ns, sha256) per file; only new or
changed files are extracted (in a process pool when there are many), removed ones are deleted,
a file with the same text as another (a page as .html and as .txt) is indexed once, and the fts
indexes are rebuilt only when something changed (core.search.corpus_build). An unchanged corpus
is checked through a read-only connection and costs a `stat` per file. The index is built lazily
on the first search.

Concurrency: DuckDB allows one writing process per file. Writes happen under a per-path thread
lock plus an flock on a sidecar lock file; searching uses a read-only connection (so other
processes may search the same index) with a cursor per call (so threads may search at once).
If the index is held by another process and cannot be updated, the existing index is used as is.

The fts extension is loaded offline by core.text.fts, from the file the pinned
`duckdb-extension-fts` package ships (plain `INSTALL fts` downloads, which fails offline).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote, urlsplit

import duckdb

from core.text.embedding import EmbeddingUnavailable, embedder
from core.text.fts import fts_extension_path
from core.models import Heading, SearchResult, Source
from core.search import corpus_rank, corpus_vocab
from core.search import page_text as textlib
from core.search.corpus_build import (SCHEMA_VERSION, BuildOptions, IndexLock, apply,
                                      boilerplate_spans, default_workers, known_files,
                                      open_db, skip_counts, stored_headings)
from core.search.corpus_vocab import Vocabulary
from core.search.headings import within
from core.search.corpus_files import EXTENSIONS, ReadLimits, summary, walk
from core.search.documents import PAGE_BREAK, PAGED

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexStats:
    files: int  # files indexed (twins included, skipped ones not)
    extracted: int
    removed: int
    rebuilt: bool
    seconds: float
    stale: bool = False  # changes were found but another process held the index
    duplicates: int | None = None  # files indexed as another file's twin; None: not counted
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> files not indexed


class CorpusSearch:
    """Hybrid search over a local folder of documents (see module docstring).

    workers: extraction processes for big changes (None: up to 4, one per core; 1: in-process).
    batch_size: files written per transaction while indexing (bounds memory).
    semantic_weight: share of the embedding's cosine in a result's score (0: BM25 only).
    max_file_bytes, max_html_bytes: larger files are skipped before they are read ("too large";
    HTML costs far more to parse than its size). follow_symlinks: index file symlinks whose
    target is outside the folder too (folder symlinks are never followed). allow_hardlinks:
    index files with more than one hard link too (skipped by default: "hard link").
    """

    name = "corpus"

    def __init__(self, corpus_dir: Path, index_path: Path, *, read_chars: int = 20_000,
                 passage_chars: int = 1500, max_file_bytes: int = 20_000_000,
                 max_html_bytes: int = 2_000_000, follow_symlinks: bool = False,
                 allow_hardlinks: bool = False, workers: int | None = None, batch_size: int = 256,
                 semantic_weight: float = corpus_rank.SEMANTIC_WEIGHT) -> None:
        self.corpus_dir = Path(corpus_dir).resolve()
        self.index_path = Path(index_path)
        self.read_chars = read_chars
        self.passage_chars = passage_chars
        self.max_file_bytes = max_file_bytes
        self.semantic_weight = semantic_weight
        self.limits = ReadLimits(max_file_bytes=max_file_bytes, max_html_bytes=max_html_bytes,
                                 follow_symlinks=follow_symlinks,
                                 allow_hardlinks=allow_hardlinks)
        self._build = BuildOptions(passage_chars=passage_chars,
                                   workers=default_workers() if workers is None else workers,
                                   batch_size=max(1, batch_size), limits=self.limits)
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._pages: dict[tuple[str, str], list[int]] = {}  # (path, sha256) -> page starts
        self._walk_skips: Counter[str] = Counter()
        self._boilerplate: set[str] | None = None  # line hashes, read once per index build
        self._lock = threading.Lock()  # guards _conn swaps and lazy indexing
        self._readers = 0
        self._idle = threading.Condition(self._lock)
        self.last_stats: IndexStats | None = None

    # ---- public API -------------------------------------------------------------------------

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        sql = corpus_rank.candidate_query(query, k)
        if sql is None:
            return []
        candidates = [corpus_rank.Candidate(path, ord_, title or "", body, float(score),
                                            float(titled), heads)
                      for path, ord_, title, body, score, titled, heads
                      in self._query(sql.sql, sql.params)]
        ranked = corpus_rank.rerank(query, candidates, k, embedder=self._embedder(),
                                    weight=self.semantic_weight)
        return [SearchResult(url=self._hit_url(r.candidate.path, r.candidate.ord),
                             title=r.candidate.title or Path(r.candidate.path).stem,
                             snippet=corpus_rank.snippet(r.candidate.body, query), rank=i)
                for i, r in enumerate(ranked, start=1)]

    def read(self, result: SearchResult) -> Source | None:
        located = self._locate(result.url)
        if located is None:
            return None
        path, ord_, page = located
        docs = self._query("SELECT title, text, headings FROM files WHERE path = ?", [path])
        if not docs or not docs[0][1]:
            return None
        title, text, heads = docs[0]
        headings = stored_headings(heads)
        if page is not None:
            return self._read_page(path, title or result.title, text, page, headings)
        spans = self._query("SELECT start, stop FROM passages WHERE path = ? ORDER BY ord", [path])
        start, stop = _window(text, [tuple(s) for s in spans], ord_, self.read_chars)
        # The whole document is one source whichever passage found it; a window keeps its #pN.
        url = result.url.split("#", 1)[0] if (start, stop) == (0, len(text)) else result.url
        return Source(url=url, title=title or result.title, text=text[start:stop],
                      headings=within(headings, start, stop),
                      boilerplate=self._repeated(text[start:stop]))

    def fingerprint(self, queries: Sequence[str], k: int) -> str:
        """What these searches could read now: the documents they hit, each with the hash of
        its bytes. A step that read from the corpus keys its cache on it, so a page added,
        edited or removed is seen by a retry, and a step it does not touch is not run again."""
        seen: set[str] = set()
        for query in dict.fromkeys(q for q in queries if q.strip()):
            for hit in self.search(query, k):
                located = self._locate(hit.url)
                if located is not None:
                    seen.add(located[0])
        rows = self._query(f"SELECT path, sha256 FROM files WHERE path IN "
                           f"(SELECT unnest(json_transform(?, '[\"VARCHAR\"]')))",
                           [json.dumps(sorted(seen))]) if seen else []
        digest = hashlib.sha256()
        for path, sha in sorted(rows):
            digest.update(f"{path}\0{sha}\n".encode())
        return digest.hexdigest()[:24]

    def vocabulary(self, words: Sequence[str]) -> Vocabulary:
        """How many documents of the corpus use each of `words`, and how many name it in a
        title or heading (core.search.corpus_vocab): what a topic's words are worth here."""
        self._ensure_index()
        with self._lock:
            if self._conn is None:
                return Vocabulary(documents=0, words={})
            cur = self._conn.cursor()
            self._readers += 1
        try:
            return corpus_vocab.vocabulary(cur, words)
        finally:
            cur.close()
            with self._lock:
                self._readers -= 1
                self._idle.notify_all()

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
            on_disk, self._walk_skips = walk(self.corpus_dir, self.limits)
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
                applied = apply(writer, self.corpus_dir, on_disk, self._build)
            finally:
                writer.close()
            self._conn = self._try_open(read_only=True)
            return self._done(len(on_disk), applied.extracted, applied.removed, applied.rebuilt,
                              began, duplicates=applied.duplicates)

    def _done(self, files: int, extracted: int, removed: int, rebuilt: bool, began: float,
              stale: bool = False, duplicates: int | None = None) -> IndexStats:
        recorded: dict[str, int] = {}  # skipped when read: rows of the index, without passages
        if self._conn is not None:
            cur = self._conn.cursor()
            try:
                recorded = skip_counts(cur)
            finally:
                cur.close()
        indexed = files - sum(recorded.values())
        skipped = self._walk_skips + Counter(recorded)
        self._boilerplate = None
        self.last_stats = IndexStats(indexed, extracted, removed, rebuilt,
                                     time.perf_counter() - began, stale, duplicates,
                                     dict(skipped))
        # Once per build, and once per process for a corpus with files it cannot index.
        if rebuilt or extracted or removed or skipped:
            log.log(logging.WARNING if skipped else logging.INFO, "corpus %s: %s",
                    self.corpus_dir, summary(indexed, skipped))
        return self.last_stats

    def _known(self) -> dict[str, tuple[int, int, str]] | None:
        """The files table, or None when the index is missing, foreign or from an old schema."""
        cur = self._conn.cursor()
        try:
            return known_files(cur, self.passage_chars)
        finally:
            cur.close()

    # ---- reading ----------------------------------------------------------------------------

    def _embedder(self) -> corpus_rank.Similarity | None:
        if self.semantic_weight <= 0:
            return None
        try:
            return embedder()
        except EmbeddingUnavailable as exc:  # a broken install costs the re-rank, not search
            log.warning("corpus search without re-ranking by meaning: %s", exc)
            return None

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

    def _hit_url(self, path: str, ord_: int) -> str:
        """A passage's URL: "#p<ord>", or "#page=<n>" in a PDF ("#slide=<n>" in a deck)."""
        unit = PAGED.get(Path(path).suffix.lower())
        if unit is None:
            return self._url(path, ord_)
        found = self._query("SELECT p.start, f.sha256 FROM passages p JOIN files f USING (path) "
                            "WHERE p.path = ? AND p.ord = ?", [path, ord_])
        if not found:
            return self._url(path, ord_)
        start, digest = found[0]
        starts = self._page_starts(path, digest)
        return f"{(self.corpus_dir / path).as_uri()}#{unit}={bisect.bisect_right(starts, start)}"

    def _page_starts(self, path: str, digest: str) -> list[int]:
        """Offsets where each page of a paged document starts (page n at starts[n - 1])."""
        key = (path, digest)
        starts = self._pages.get(key)
        if starts is None:
            rows = self._query("SELECT text FROM files WHERE path = ?", [path])
            text = rows[0][0] if rows else ""
            starts = [0] + [i + 1 for i, ch in enumerate(text or "") if ch == PAGE_BREAK]
            with self._lock:
                self._pages = {k: v for k, v in self._pages.items() if k[0] != path}
                self._pages[key] = starts
        return starts

    def _read_page(self, path: str, title: str, text: str, page: int,
                   headings: tuple[Heading, ...] = ()) -> Source | None:
        pages = text.split(PAGE_BREAK)
        if not 1 <= page <= len(pages) or not pages[page - 1].strip():
            return None
        unit = PAGED.get(Path(path).suffix.lower(), "page")
        body = textlib.trim_text(pages[page - 1], self.read_chars)
        label = "p." if unit == "page" else "slide"
        start = sum(len(p) + len(PAGE_BREAK) for p in pages[:page - 1])
        return Source(url=f"{(self.corpus_dir / path).as_uri()}#{unit}={page}",
                      title=f"{title} ({label} {page})", text=body,
                      headings=within(headings, start, start + len(body)),
                      boilerplate=self._repeated(body))

    def _repeated(self, text: str) -> tuple[tuple[int, int], ...]:
        """Spans of `text` whose lines the corpus repeats on many files (its boilerplate,
        found when the index was built: core.search.corpus_build)."""
        if self._boilerplate is None:
            rows = self._query("SELECT h FROM boilerplate", [])
            self._boilerplate = {h for (h,) in rows}
        return boilerplate_spans(text, self._boilerplate) if self._boilerplate else ()

    def _locate(self, url: str) -> tuple[str, int, int | None] | None:
        """(path, passage, page) a URL names; page is None unless it names a page or slide."""
        parts = urlsplit(url)
        if parts.scheme != "file":
            return None
        try:
            rel = Path(unquote(parts.path)).relative_to(self.corpus_dir).as_posix()
        except ValueError:
            return None
        unit = PAGED.get(Path(rel).suffix.lower())
        paged = re.fullmatch(rf"{unit}=(\d+)", parts.fragment) if unit else None
        if paged:
            return rel, 0, int(paged.group(1))
        match = re.fullmatch(r"p(\d+)", parts.fragment)
        return rel, int(match.group(1)) if match else 0, None


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


__all__ = ["CorpusSearch", "IndexStats", "EXTENSIONS", "SCHEMA_VERSION", "IndexLock", "open_db",
           "fts_extension_path"]
