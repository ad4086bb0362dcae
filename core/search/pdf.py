"""Text of a PDF, for the page fetcher: pypdf's text layer, or a refusal that says why not.

    pdf_to_text(body, url=..., max_chars=...) -> (text, title)

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

    parts: list[str] = []
    size = 0
    failed = 0
    for index in range(min(count, max_pages)):
        try:
            page_text = pages[index].extract_text() or ""
        except Exception:  # noqa: BLE001 - one broken page does not spoil the others
            failed += 1
            continue
        page_text = _clean(page_text)
        if not page_text:
            continue
        parts.append(page_text)
        size += len(page_text) + 2
        if size > max_chars:
            break
    if not parts:
        if count and failed == min(count, max_pages):
            raise PageRefused(url, "unreadable PDF")
        raise PageRefused(url, "PDF without a text layer (scanned?)")
    text = "\n\n".join(parts)
    return textlib.trim_text(text, max_chars), _title(reader, text)


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
