"""Text of a PDF, for the page fetcher: pypdf's text layer, or a refusal that says why not.

    pdf_to_text(body, url=..., max_chars=...) -> (text, title)
    pdf_pages(body, url=..., max_chars=...)   -> (text of each page, title): for the corpus,
                                                 whose citations name the page

The text is every page's text layer, pages separated by a blank line, read until `max_chars`
(and at most MAX_PAGES pages) and then trimmed at a paragraph or sentence boundary. The title is
the document's /Title metadata, else its first non-empty line. An encrypted PDF is opened with
the empty password (most "protected" PDFs only restrict printing or copying); one that needs a
real password is refused. A PDF whose pages carry no text (a scan) and a PDF pypdf cannot parse
are refused with distinct reasons, as PageRefused (never PageUnavailable: fetching it again will
not help).

What it does not do: OCR, layout analysis, tables, or reading attachments.
"""

from __future__ import annotations

import io
import logging

from core.search import page_text as textlib
from core.search.fetch_types import PageRefused

MAX_PAGES = 300
_PDF_MAGIC = b"%PDF-"

log = logging.getLogger(__name__)
# pypdf warns at length about every malformed file it recovers from; a research run reads many.
if logging.getLogger("pypdf").level == logging.NOTSET:
    logging.getLogger("pypdf").setLevel(logging.ERROR)


def looks_like_pdf(body: bytes) -> bool:
    """True when `body` starts with the PDF header (after any whitespace or byte-order mark)."""
    return body[:1024].lstrip(b"\xef\xbb\xbf\x00 \t\r\n").startswith(_PDF_MAGIC)


def pdf_to_text(body: bytes, *, url: str, max_chars: int,
                max_pages: int = MAX_PAGES) -> tuple[str, str]:
    """(text, title) of the PDF in `body`; PageRefused when it has no readable text layer."""
    pages, title = pdf_pages(body, url=url, max_chars=max_chars, max_pages=max_pages)
    text = "\n\n".join(page for page in pages if page)
    return textlib.trim_text(text, max_chars), title


def pdf_pages(body: bytes, *, url: str, max_chars: int,
              max_pages: int = MAX_PAGES) -> tuple[list[str], str]:
    """(the text of each page, title): pages[n - 1] is page n's text layer, "" for a page
    without one, read until `max_chars` in all (the page that crosses it is kept whole) and at
    most `max_pages` pages. The same refusals as `pdf_to_text`."""
    try:
        from pypdf import PasswordType, PdfReader
    except ImportError as exc:  # pragma: no cover - pypdf is a declared dependency
        raise PageRefused(url, "PDF support is not installed (pypdf)") from exc

    try:
        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # noqa: BLE001 - unknown cipher, missing crypto library
                raise PageRefused(url, "encrypted PDF") from exc
            if opened == PasswordType.NOT_DECRYPTED:
                raise PageRefused(url, "encrypted PDF (needs a password)")
        pages = reader.pages
        count = len(pages)
    except PageRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types on broken files
        raise PageRefused(url, "unreadable PDF") from exc

    texts: list[str] = []
    size = 0
    failed = 0
    for index in range(min(count, max_pages)):
        try:
            page_text = pages[index].extract_text() or ""
        except Exception:  # noqa: BLE001 - one broken page does not spoil the others
            failed += 1
            page_text = ""
        page_text = _clean(page_text)
        texts.append(page_text)
        size += len(page_text) + 2 if page_text else 0
        if size > max_chars:
            break
    if not any(texts):
        if count and failed == min(count, max_pages):
            raise PageRefused(url, "unreadable PDF")
        raise PageRefused(url, "PDF without a text layer (scanned?)")
    return texts, _title(reader, "\n".join(t for t in texts if t))


def _clean(page_text: str) -> str:
    """A page's text with trailing spaces and runs of blank lines removed (blank lines separate
    pages, so they must not also appear inside one), and NULs dropped."""
    lines = [line.rstrip() for line in page_text.replace("\x00", "").splitlines()]
    return "\n".join(line for line in lines if line.strip()).strip()


def _title(reader, text: str) -> str:
    try:
        meta = reader.metadata
        title = (meta.title if meta is not None else None) or ""
    except Exception:  # noqa: BLE001 - a broken info dictionary is no title, not an error
        title = ""
    title = " ".join(str(title).split())
    if title:
        return title[:300]
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())[:300]
    return ""


def pdf_outline(body: bytes, max_entries: int = 500) -> list[tuple[int, int, str]]:
    """The PDF's outline (bookmarks) as (page index, level, title), levels 1-3; [] when it has
    none or it cannot be read (an outline is a nicety, never a reason to refuse the file)."""
    try:
        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(body), strict=False)
        if reader.is_encrypted:
            reader.decrypt("")
        entries: list[tuple[int, int, str]] = []

        def walk(items, level: int) -> None:
            for item in items:
                if len(entries) >= max_entries:
                    return
                if isinstance(item, list):
                    walk(item, level + 1)
                elif level <= 3:
                    page = reader.get_destination_page_number(item)
                    if page is not None and page >= 0:
                        entries.append((page, level, str(item.title or "")))

        walk(reader.outline, 1)
        return entries
    except Exception:  # noqa: BLE001 - pypdf raises many types on odd outlines
        return []
