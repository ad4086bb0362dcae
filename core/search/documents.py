"""Text of the documents a corpus may hold besides web pages: PDF, Word (.docx), PowerPoint (.pptx).

    document_text(name, raw) -> Document(title, pages)

`pages` is the document's text in reading order, cut where a citation should be able to point:
a PDF's pages (core.search.pdf, the web's reader with its caps and refusals), a deck's slides,
and one page for a Word document (it has no fixed pages). Corpus indexing joins them with
PAGE_BREAK, so the stored text keeps the boundaries, passages never cross one, and a passage's
page is the number of breaks before it plus one.

What is read: Word: the body's paragraphs and tables in document order (a table row as its
cells joined by " | "), not headers, footers, comments or text boxes; PowerPoint: each slide's
text frames, tables and grouped shapes, not speaker notes. Titles come from the document's own
properties, else its first heading (a slide's title placeholder), else its first line.

Memory: a Word body is streamed (core.search.wordml: one paragraph at a time, at most
wordml.MAX_BLOCKS paragraphs and rows); a deck is parsed whole by python-pptx, so its XML parts
may unpack to at most MAX_DECK_XML bytes (slides' XML is small; pictures do not count).

Refusals (`PageRefused`, with a reason): a file that is not the zip container these formats are,
one that would unpack to more than MAX_UNPACKED bytes (a zip bomb), a deck whose XML passes
MAX_DECK_XML, one the library cannot parse, and one without any text. XML entities are never
resolved (wordml and python-pptx parse with resolve_entities off).
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from dataclasses import dataclass

from core.models import Heading
from core.search import pdf as pdflib
from core.search import wordml
from core.search import page_text as textlib
from core.search.fetch_types import PageRefused
from core.search.headings import Squeezed, clean
from core.search.wordml import row as _row

log = logging.getLogger(__name__)

PAGE_BREAK = "\f"  # never inside a page's text: every reader here splits lines on it
MAX_UNPACKED = 200_000_000  # bytes a .docx or .pptx may unpack to
MAX_DECK_XML = 32_000_000  # bytes a .pptx's XML parts may unpack to (parsed whole)
MAX_CHARS = 2_000_000  # text kept per document (a PDF stops at the page that crosses it)
PAGED = {".pdf": "page", ".pptx": "slide"}  # the URL fragment that names a page: #page=3


@dataclass(frozen=True)
class Document:
    title: str
    pages: tuple[str, ...]
    # (page index, offset in that page, level, text): the document's own headings
    marks: tuple[tuple[int, int, int, str], ...] = ()

    @property
    def text(self) -> str:
        return PAGE_BREAK.join(self.pages)

    @property
    def headings(self) -> tuple[Heading, ...]:
        """The headings placed in `text` (pages joined by PAGE_BREAK)."""
        starts, at = [], 0
        for page in self.pages:
            starts.append(at)
            at += len(page) + len(PAGE_BREAK)
        return tuple(Heading(start=starts[p] + offset, level=level, text=text)
                     for p, offset, level, text in self.marks if p < len(starts) and text)


def is_document(name: str) -> bool:
    return name.lower().endswith((".pdf", ".docx", ".pptx"))


def document_text(name: str, raw: bytes, *, max_chars: int = MAX_CHARS) -> Document:
    """The document in `raw` (its kind from `name`'s extension); PageRefused when unreadable."""
    lowered = name.lower()
    if lowered.endswith(".pdf"):
        pages, title = pdflib.pdf_pages(raw, url=name, max_chars=max_chars)
        return Document(title, tuple(pages), _placed(pages, pdflib.pdf_outline(raw)))
    if lowered.endswith(".docx"):
        return _docx(name, raw, max_chars)
    if lowered.endswith(".pptx"):
        return _pptx(name, raw, max_chars)
    raise PageRefused(name, "not a PDF, Word or PowerPoint document")


def _archive(name: str, raw: bytes) -> zipfile.ZipFile:
    """The zip container, checked: a zip, and not one that unpacks past MAX_UNPACKED."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PageRefused(name, "not a valid Office document (bad zip)") from exc
    if unpacked > MAX_UNPACKED:
        raise PageRefused(name, f"unpacks to {unpacked:,} bytes (more than {MAX_UNPACKED:,})")
    return archive


def _opened(name: str, raw: bytes, load):
    """Check the zip container, then parse it with `load` (python-pptx). A deck's XML parts
    are parsed whole when it is opened, so their total is capped (MAX_DECK_XML)."""
    with _archive(name, raw) as archive:
        xml = sum(i.file_size for i in archive.infolist() if i.filename.endswith(".xml"))
    if xml > MAX_DECK_XML:
        raise PageRefused(name, f"its XML unpacks to {xml:,} bytes (more than "
                                f"{MAX_DECK_XML:,}: a deck's text is parsed whole)")
    try:
        return load(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - the libraries raise many types on broken files
        raise PageRefused(name, f"unreadable document ({type(exc).__name__})") from exc


def _docx(name: str, raw: bytes, max_chars: int) -> Document:
    """Word's body streamed (core.search.wordml): memory is one paragraph's, whatever the
    size of document.xml."""
    blocks: list[str] = []
    heading = ""
    marks: list[tuple[int, int, int, str]] = []
    size = 0
    with _archive(name, raw) as archive:
        try:
            for block in wordml.blocks(archive, max_chars):
                if block.style and not heading and block.style.startswith(("Title", "Heading")):
                    heading = block.text
                level = _heading_level(block.style)
                if level:
                    marks.append((0, size, level, clean(block.text)))
                blocks.append(block.text)
                size += len(block.text) + 2
            title = wordml.core_title(archive)
        except Exception as exc:  # noqa: BLE001 - a broken part: lxml and zipfile raise many
            raise PageRefused(name, f"unreadable document ({type(exc).__name__})") from exc
    body = textlib.trim_text("\n\n".join(blocks), max_chars)
    if not body.strip():
        raise PageRefused(name, "document without text")
    title = _line(title) or heading or textlib.first_line_title(body)
    return Document(title[:300], (body,), tuple(m for m in marks if m[1] < len(body)))


def _heading_level(style: str) -> int:
    """A Word paragraph style's heading level: Title 1, "Heading 2" 2; 0 for body text."""
    if style == "Title":
        return 1
    found = re.fullmatch(r"Heading (\d)", style)
    return min(int(found.group(1)), 3) if found else 0


def _placed(pages: list[str], outline: list[tuple[int, int, str]]
            ) -> tuple[tuple[int, int, int, str], ...]:
    """A PDF's outline entries (page index, level, title) placed on their pages: where the
    title's words are on the page, else at its top."""
    marks = []
    for page, level, title in outline:
        if 0 <= page < len(pages) and clean(title):
            at = Squeezed(pages[page]).find(title, 0)
            marks.append((page, at or 0, level, clean(title)))
    return tuple(marks)


def _pptx(name: str, raw: bytes, max_chars: int) -> Document:
    from pptx import Presentation

    deck = _opened(name, raw, Presentation)
    slides: list[str] = []
    marks: list[tuple[int, int, int, str]] = []
    first_title = ""
    size = 0
    for slide in deck.slides:
        texts = [t for t in (_shape_text(shape) for shape in slide.shapes) if t]
        heading = _line(slide.shapes.title.text_frame.text) if slide.shapes.title is not None \
            else ""
        if not first_title:
            first_title = heading
        if heading:  # a slide's title heads the slide
            marks.append((len(slides), 0, 2, clean(heading)))
        slides.append("\n".join(texts))
        size += len(slides[-1]) + 1
        if size > max_chars:
            break
    if not any(s.strip() for s in slides):
        raise PageRefused(name, "presentation without text")
    title = _line(deck.core_properties.title or "") or first_title or textlib.first_line_title(
        next(s for s in slides if s.strip()))
    return Document(title[:300], tuple(slides), tuple(marks))


def _shape_text(shape) -> str:
    from pptx.shapes.group import GroupShape

    if isinstance(shape, GroupShape):
        return "\n".join(t for t in (_shape_text(s) for s in shape.shapes) if t)
    if getattr(shape, "has_table", False) and shape.has_table:
        return "\n".join(_row(cell.text for cell in row.cells) for row in shape.table.rows)
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = [_line(p.text) for p in shape.text_frame.paragraphs]
        return "\n".join(line for line in lines if line)
    return ""


def _line(text: str) -> str:
    """One line: a soft line break or vertical tab inside a paragraph becomes a space; a page
    break never survives (it would split a page in two)."""
    return " ".join(text.replace(PAGE_BREAK, " ").split())
