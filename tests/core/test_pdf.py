"""pdf_to_text on PDFs built here with pypdf: text layers, titles, scans, passwords, garbage."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from core.search.pdf import looks_like_pdf, pdf_to_text
from core.search.web import PageRefused, PageUnavailable


def make_pdf(pages: list[list[str]], *, title: str | None = None,
             password: str | None = None) -> bytes:
    """A PDF whose pages show `pages` (lines of Helvetica text each; an empty list is a blank
    page, like a scan without OCR), optionally titled and encrypted with `password`."""
    writer = PdfWriter()
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        if not lines:
            continue
        font = DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                 NameObject("/Subtype"): NameObject("/Type1"),
                                 NameObject("/BaseFont"): NameObject("/Helvetica")})
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})})
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({escaped}) Tj T*")
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    if title:
        writer.add_metadata({"/Title": title})
    if password is not None:
        writer.encrypt(user_password=password, owner_password="owner-secret",
                       algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


PAPER = [["Event loops in practice", "An event loop dispatches callbacks one at a time."],
         ["Coroutines yield control at every await.", "Blocking calls stall the loop."]]


def refusal(body: bytes, **kw) -> PageRefused:
    with pytest.raises(PageRefused) as info:
        pdf_to_text(body, url="http://x/doc.pdf", max_chars=kw.pop("max_chars", 10_000), **kw)
    assert not isinstance(info.value, PageUnavailable)
    return info.value


def test_text_of_every_page_and_the_metadata_title() -> None:
    text, title = pdf_to_text(make_pdf(PAPER, title="Async I/O: a field guide"),
                              url="http://x/doc.pdf", max_chars=10_000)
    assert title == "Async I/O: a field guide"
    assert "dispatches callbacks one at a time." in text
    assert "Coroutines yield control at every await." in text
    first, second = text.split("\n\n")  # pages are separated by one blank line
    assert "Event loops" in first and "Blocking calls" in second


def test_title_falls_back_to_the_first_line() -> None:
    text, title = pdf_to_text(make_pdf(PAPER), url="http://x/doc.pdf", max_chars=10_000)
    assert title == "Event loops in practice"
    assert text.startswith("Event loops in practice")


def test_blank_pages_before_the_text_are_skipped() -> None:
    text, _ = pdf_to_text(make_pdf([[], PAPER[0]]), url="http://x/d.pdf", max_chars=10_000)
    assert text.startswith("Event loops in practice")


def test_scanned_pdf_without_text_layer_is_refused() -> None:
    assert refusal(make_pdf([[], []])).reason == "PDF without a text layer (scanned?)"


@pytest.mark.parametrize("body", [b"%PDF-1.7\n" + b"\x00\x01binary" * 100, b"%PDF-1.4\n%%EOF",
                                  b"not a pdf at all"])
def test_broken_pdf_is_refused_as_unreadable(body: bytes) -> None:
    assert refusal(body).reason == "unreadable PDF"


def test_pdf_with_an_empty_user_password_is_read() -> None:
    text, title = pdf_to_text(make_pdf(PAPER, title="Locked", password=""),
                              url="http://x/doc.pdf", max_chars=10_000)
    assert "dispatches callbacks" in text and title == "Locked"


def test_pdf_needing_a_password_is_refused() -> None:
    assert "encrypted" in refusal(make_pdf(PAPER, password="hunter2")).reason


def test_long_pdf_stops_at_max_chars_and_max_pages() -> None:
    pages = [[f"Page {i} says something long enough to count as a sentence."] * 10
             for i in range(40)]
    body = make_pdf(pages)
    text, _ = pdf_to_text(body, url="http://x/doc.pdf", max_chars=3_000)
    assert 1_500 <= len(text) <= 3_000 and "Page 39" not in text
    text, _ = pdf_to_text(body, url="http://x/doc.pdf", max_chars=1_000_000, max_pages=3)
    assert "Page 2 " in text and "Page 3 " not in text


def test_looks_like_pdf() -> None:
    assert looks_like_pdf(make_pdf(PAPER))
    assert looks_like_pdf(b"\xef\xbb\xbf%PDF-1.4 ...")
    assert not looks_like_pdf(b"<html>%PDF-</html>")
    assert not looks_like_pdf(b"<html><body>hello</body></html>")
