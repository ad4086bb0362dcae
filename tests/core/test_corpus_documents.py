"""PDF, Word and PowerPoint files in a corpus: extracted, searched, read page by page.

The files are real ones, written by python-docx, python-pptx and fpdf2, and read back by the
product's readers (pypdf for PDFs, as on the web). A PDF's hit and source name its page
("#page=2"), a deck's its slide; a Word document is one source. Files that cannot be read (a
scan without a text layer, an encrypted PDF, a broken or bomb-sized .docx) are indexed without
text and never break a build.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from core.models import SearchResult
from core.search.corpus import CorpusSearch
from core.search.corpus_extract import extract_text, passages
from core.search.documents import PAGE_BREAK, document_text
from core.search.fetch_types import PageRefused
from tests.fakes.documents import write_docx, write_pdf, write_pptx

PDF_PAGES = [
    "Locks in practice. A mutex lets one thread at a time into a critical section.",
    "Deadlocks appear when two threads each hold one lock and wait for the other forever.",
    "Lock ordering prevents deadlock: every thread takes the locks in the same global order.",
]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    write_pdf(folder / "locks.pdf", "Locks handbook", PDF_PAGES)
    write_docx(folder / "queues.docx", "Queues memo", [
        "Processes exchange data through queues that pickle every object they carry.",
        "A pipe connects exactly two processes, one at each end."],
        table=[["primitive", "crosses processes"], ["queue", "yes"]])
    write_pptx(folder / "loops.pptx", "Event loops", [
        ("Coroutines", "A coroutine yields control to the event loop at every await."),
        ("Blocking", "A blocking call inside a coroutine stalls every other coroutine.")])
    return folder


def test_each_kind_is_extracted_with_its_pages(corpus: Path) -> None:
    title, text, _ = extract_text("locks.pdf", (corpus / "locks.pdf").read_bytes())
    assert title == "Locks handbook" and text.split(PAGE_BREAK) == PDF_PAGES
    cut = passages(title, text, 40)  # tiny passages: still never across a page
    assert all(PAGE_BREAK not in text[a:b] for a, b in cut.spans)
    title, text, headings = extract_text("queues.docx", (corpus / "queues.docx").read_bytes())
    assert title == "Queues memo" and PAGE_BREAK not in text
    assert "queues that pickle every object" in text and "queue | yes" in text
    # Word's heading styles are the document's headings, placed where their text is.
    assert [(h.level, h.text, text[h.start:h.start + len(h.text)]) for h in headings] == [
        (1, "Queues memo", "Queues memo")]
    title, text, headings = extract_text("loops.pptx", (corpus / "loops.pptx").read_bytes())
    assert title == "Event loops"
    assert text.split(PAGE_BREAK) == [
        "Coroutines\nA coroutine yields control to the event loop at every await.",
        "Blocking\nA blocking call inside a coroutine stalls every other coroutine."]
    # A slide's title heads the slide.
    assert [(h.text, text[h.start:].split("\n", 1)[0]) for h in headings] == [
        ("Coroutines", "Coroutines"), ("Blocking", "Blocking")]


def test_a_pdf_hit_and_its_source_name_the_page(corpus: Path, tmp_path: Path) -> None:
    search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1, semantic_weight=0)
    hits = search.search("deadlock two threads hold lock wait", k=3)
    pdf = next(h for h in hits if "locks.pdf" in h.url)
    assert pdf.url == (corpus / "locks.pdf").as_uri() + "#page=2"
    source = search.read(pdf)
    assert source.url == pdf.url and source.title == "Locks handbook (p. 2)"
    assert source.text == PDF_PAGES[1] and pdf.snippet in source.text
    slide = next(h for h in search.search("blocking call stalls coroutine", k=3)
                 if "loops.pptx" in h.url)
    assert slide.url.endswith("loops.pptx#slide=2")
    assert search.read(slide).text.startswith("Blocking\n")
    memo = next(h for h in search.search("queues pickle objects", k=3) if "queues" in h.url)
    whole = search.read(memo)
    assert whole.url == (corpus / "queues.docx").as_uri() and "pipe connects" in whole.text
    beyond = SearchResult(url=(corpus / "locks.pdf").as_uri() + "#page=9", title="x")
    assert search.read(beyond) is None


def test_unreadable_documents_are_skipped_not_fatal(corpus: Path, tmp_path: Path,
                                                    monkeypatch) -> None:
    from fpdf import FPDF

    from core.search import documents

    monkeypatch.setattr(documents, "MAX_UNPACKED", 1_000_000)

    scan = FPDF()
    scan.add_page()
    scan.rect(10, 10, 100, 100, style="F")  # an image of text, no text layer
    scan.output(str(corpus / "scan.pdf"))
    (corpus / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"\0" * 1_000_001)
    (corpus / "bomb.docx").write_bytes(bomb.getvalue())

    for name, reason in (("scan.pdf", "without a text layer"), ("broken.docx", "bad zip"),
                         ("bomb.docx", "unpacks to")):
        with pytest.raises(PageRefused, match=reason):
            document_text(name, (corpus / name).read_bytes())
        assert extract_text(name, (corpus / name).read_bytes()) == (Path(name).stem, "", ())
    search = CorpusSearch(corpus, tmp_path / "index.duckdb", workers=1, semantic_weight=0)
    assert search.index().files == 6
    assert any("locks.pdf" in h.url for h in search.search("lock ordering deadlock", k=5))
