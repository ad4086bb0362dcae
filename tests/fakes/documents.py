"""Real Word, PowerPoint and PDF files, written by the libraries users' tools write them with.

python-docx writes .docx and python-pptx writes .pptx (both also read them in the product);
fpdf2 writes a PDF whose text layer pypdf reads back, one `pages` entry per page.
"""

from __future__ import annotations

from pathlib import Path


def html_page(title: str, sections: list[tuple[str, str]]) -> str:
    """A page as documentation generators write one: a title, an h1, and an h2 per section."""
    body = "".join(f"<h2>{h}</h2>\n<p>{p}</p>\n" for h, p in sections)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><h1>{title}</h1>\n{body}</body></html>")


def write_docx(path: Path, title: str, paragraphs: list[str], *,
               table: list[list[str]] | None = None) -> Path:
    from docx import Document

    doc = Document()
    doc.core_properties.title = title
    doc.add_heading(title, level=1)
    for text in paragraphs:
        doc.add_paragraph(text)
    if table:
        grid = doc.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                grid.cell(r, c).text = cell
    doc.save(str(path))
    return path


def write_pptx(path: Path, title: str, slides: list[tuple[str, str]]) -> Path:
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = title
    for heading, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
        slide.shapes.title.text = heading
        slide.placeholders[1].text_frame.text = body
    deck.save(str(path))
    return path


def write_pdf(path: Path, title: str, pages: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path
