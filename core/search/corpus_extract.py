"""One corpus file in, one record for the index out: the part of indexing that runs in workers.

`extract_files` reads each file (core.search.corpus_files: inside the folder, under its size
cap, decodable text; otherwise the record says why it was skipped), hashes its bytes, extracts
(title, text) — trafilatura for HTML (the sections it dropped put back, the page's chapter as
its outermost heading), the text itself for .md/.txt, core.search.documents for .pdf/.docx/.pptx
(pages joined by a form feed, so passages never cross a page) — cuts the text into passages,
lists the CJK bigrams of each passage (core.text.cjk) and computes the file's content key: a hash
of its words, case-folded, without markup or whitespace, so a page saved as HTML and as its
plain-text or markdown source gets one key.

It is a pure function of the files' bytes, picklable both ways, and imports no database, so a
process pool can run it (core.search.corpus_build decides where it runs and stores the results).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from core.text import cjk
from core.models import Heading
from core.search import documents
from core.search import page_text as textlib
from core.search.corpus_files import ReadLimits, Skipped, decode, read_file
from core.search.fetch_types import PageRefused
from core.search.headings import html_headings, parent_title, text_headings, within
from core.search.html_sections import restore_sections

log = logging.getLogger(__name__)

_MD_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")  # a link's URL is markup, its text is content
_WORD = re.compile(r"[^\W_]+")  # no underscore: _emphasis_ is markup
_RST_ROLE = re.compile(r":[\w-]+:(?=`)|^\s*\.\. [\w-]+::.*$", re.M)  # reST roles, directives


@dataclass(frozen=True)
class FileJob:
    rel: str  # posix path relative to the corpus root
    size: int
    mtime_ns: int
    known_sha256: str | None  # the digest indexed last time, to tell "touched" from "changed"


@dataclass(frozen=True)
class Extraction:
    rel: str
    size: int
    mtime_ns: int
    sha256: str
    unchanged: bool  # same bytes as indexed: nothing below is filled in
    title: str = ""
    text: str = ""
    content_key: str | None = None  # None for a file without text: empty files are not twins
    spans: tuple[tuple[int, int], ...] = ()
    grams: tuple[str, ...] = ()  # per passage: its title's and body's CJK bigrams, space-joined
    skipped: str | None = None  # why it is not indexed (corpus_files.REASONS); no text then
    headings: tuple[Heading, ...] = ()  # the document's own headings, placed in `text`
    heads: tuple[str, ...] = ()  # per passage: the headings over it and in it
    head_grams: tuple[str, ...] = ()  # per passage: the CJK bigrams of its title and heads
    sketch: tuple[int, ...] = ()  # a sample of its word shingles: near copies share most


def extract_files(root: str, jobs: list[FileJob], passage_chars: int,
                  limits: ReadLimits = ReadLimits()) -> list[Extraction]:
    """Extract several files (one task of a process pool: fewer, larger messages)."""
    return [extract_file(Path(root), job, passage_chars, limits) for job in jobs]


def extract_file(root: Path, job: FileJob, passage_chars: int,
                 limits: ReadLimits = ReadLimits()) -> Extraction:
    """One file's record; a file that cannot be indexed is a record saying why, never an error."""
    try:
        raw = read_file(root, job.rel, limits)
    except Skipped as skip:
        return Extraction(job.rel, job.size, job.mtime_ns, "", unchanged=False,
                          skipped=skip.reason)
    digest = hashlib.sha256(raw).hexdigest()
    if digest == job.known_sha256:  # touched, not changed
        return Extraction(job.rel, job.size, job.mtime_ns, digest, unchanged=True)
    try:
        title, body, headings = extract_text(job.rel, raw)
        cut = passages(title, body, passage_chars, headings)
    except Skipped as skip:
        return Extraction(job.rel, job.size, job.mtime_ns, digest, unchanged=False,
                          skipped=skip.reason)
    except MemoryError:  # past a worker's memory cap (corpus_build.WORKER_MEMORY)
        log.warning("corpus file skipped: %s needs more memory than a worker may use", job.rel)
        return Extraction(job.rel, job.size, job.mtime_ns, digest, unchanged=False,
                          skipped="too large")
    return Extraction(job.rel, job.size, job.mtime_ns, digest, unchanged=False, title=title,
                      text=body, content_key=content_key(body), spans=cut.spans,
                      grams=cut.grams, headings=headings, heads=cut.heads,
                      head_grams=cut.head_grams, sketch=sketch(body))


def extract_text(rel: str, raw: bytes) -> tuple[str, str, tuple[Heading, ...]]:
    """(title, text, headings) of one corpus file; (stem, '', ()) when an HTML page has no main
    text or a document cannot be read (a scan, an encrypted PDF, a zip bomb: logged with the
    reason). Raises Skipped for a text file whose bytes are not text (corpus_files.decode)."""
    if documents.is_document(rel):
        try:
            doc = documents.document_text(rel, raw)
        except PageRefused as exc:
            log.warning("corpus file skipped: %s", exc)
            return Path(rel).stem, "", ()
        return doc.title or Path(rel).stem, doc.text, doc.headings
    decoded = decode(raw)
    if rel.lower().endswith((".html", ".htm")):
        page = textlib.extract_html(decoded, url=None)
        if not page:
            return Path(rel).stem, "", ()
        text = restore_sections(decoded, page.text)
        title = page.title or Path(rel).stem
        heads = html_headings(decoded, text)
        # The chapter a page belongs to is its outermost heading: "Getting Started" over
        # "Installation", where the chapter's own page lists its sections and says nothing.
        parent = parent_title(decoded)
        if parent and parent.lower() not in title.lower():
            heads = (Heading(start=0, level=0, text=parent), *heads)
        return title, text, heads
    return (textlib.first_line_title(decoded) or Path(rel).stem, decoded,
            text_headings(decoded))


@dataclass(frozen=True)
class Passages:
    spans: tuple[tuple[int, int], ...]  # (start, stop) of each passage of the body
    grams: tuple[str, ...]  # each passage's title and body CJK bigrams and code names
    heads: tuple[str, ...]  # each passage's headings: those over it, then those in it
    head_grams: tuple[str, ...]  # the same of the title and those headings


def passages(title: str, body: str, passage_chars: int,
             headings: tuple[Heading, ...] = ()) -> Passages:
    """The body cut into passages of about `passage_chars`; a page break
    (documents.PAGE_BREAK) always ends one."""
    found: list[tuple[int, int]] = []
    offset = 0
    for page in body.split(documents.PAGE_BREAK):
        found += [(offset + a, offset + b) for a, b in textlib.split_passages(
            page, target=passage_chars, hard_max=2 * passage_chars)]
        offset += len(page) + len(documents.PAGE_BREAK)
    spans = tuple(found)
    # The exact-term index: CJK bigrams, and names written as code (pg_am, sqlite3).
    title_grams = cjk.bigrams(title) + textlib.code_names(title)
    grams = tuple(" ".join(title_grams + cjk.bigrams(body[a:b])
                           + textlib.code_names(body[a:b])) for a, b in spans)
    heads = tuple(" · ".join(dict.fromkeys(h.text for h in within(headings, a, b)))
                  for a, b in spans)
    head_grams = tuple(" ".join(title_grams + cjk.bigrams(h) + textlib.code_names(h))
                       for h in heads)
    return Passages(spans, grams, heads, head_grams)


def content_key(text: str) -> str | None:
    """Hash of the text's words in order, case-folded: whitespace, punctuation, markdown marks
    and link targets do not count, so an HTML page and its text source hash alike."""
    words = _WORD.findall(_MD_LINK_TARGET.sub("]", text).casefold())
    if not words:
        return None
    return hashlib.sha256(" ".join(words).encode("utf-8")).hexdigest()


SHINGLE = 5  # words per shingle
SAMPLE = 8  # one shingle in SAMPLE (by hash) is kept
MAX_SKETCH = 4_000


def sketch(text: str) -> tuple[int, ...]:
    """A sample of the text's five-word shingles (case-folded words, markup and whitespace
    aside), as 63-bit hashes: two files sharing most of them are copies of one page (an HTML
    page and its text source, a mirrored folder), whatever their markup or a footer says.
    CJK text is shingled by characters. Deterministic, so the index can compare files."""
    words = _WORD.findall(_RST_ROLE.sub(" ", _MD_LINK_TARGET.sub("]", text)).casefold())
    units = [ch for w in words for ch in (w if cjk.has_cjk(w) else [w])]
    kept: set[int] = set()
    for i in range(max(0, len(units) - SHINGLE + 1)):
        digest = hashlib.blake2b(" ".join(units[i:i + SHINGLE]).encode("utf-8"),
                                 digest_size=8).digest()
        value = int.from_bytes(digest, "big") >> 1
        if value % SAMPLE == 0:
            kept.add(value)
    return tuple(sorted(kept)[:MAX_SKETCH])
