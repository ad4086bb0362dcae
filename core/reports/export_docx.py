"""A stored report as a Word document (.docx), written with python-docx.

    data = to_docx(report)   # bytes of a .docx file

The document has in its properties the report's title and topic, author "researchflow" and
the time the report was stored (UTC; now for a report not stored), no thumbnail, and
"researchflow" as the application (docProps/app.xml); its headings as Word headings (so the
navigation pane and a table of contents find them), paragraphs with their bold and italic, the
quotes as Word's Quote style, lists as list paragraphs, the comparison table as a Word table
(header row bold, repeated on every page), and the references rebuilt from the citations: a
numbered paragraph each, bookmarked so a citation marker `[n]` in the prose is an internal link
to it, the title linked to the source when the source is an http(s) URL, the URL in full (a
local corpus file by its path in the corpus folder), and
the quote as written. Link rules are those of `core.reports.export_blocks`.

What it does not do: images, page numbers, a table of contents field.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from docx import Document
from docx.enum.text import WD_COLOR_INDEX
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph

from core.reports.export_blocks import (Block, References, Run, Runs, is_web_url,
                                        report_blocks)
from core.models import Report

_LINK_COLOUR = RGBColor(0x0B, 0x57, 0xD0)
_MONO = "Consolas"
# Characters XML 1.0 cannot hold (page text may carry them): dropped, or lxml refuses the run.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _safe(text: str) -> str:
    return _NOT_XML.sub("", text)


def to_docx(report: Report, *, corpus_dirs: Sequence[Path] = ()) -> bytes:
    """The report as the bytes of a .docx file (see the module docstring); `corpus_dirs`: see
    core.reports.export_blocks.shown_url."""
    blocks, references = report_blocks(report, corpus_dirs)
    doc = Document()
    _properties(doc, report)
    for block in blocks:
        _block(doc, block)
    if references is not None:
        _references(doc, references)
    footer = doc.add_paragraph()
    _plain_run(footer, f"report {report.report_id} · engine {report.engine}", size=8)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


_APP_XML = (b"<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n"
            b'<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/'
            b'extended-properties" xmlns:vt="http://schemas.openxmlformats.org/officeDocument/'
            b'2006/docPropsVTypes"><Application>researchflow</Application>'
            b"<DocSecurity>0</DocSecurity><ScaleCrop>false</ScaleCrop>"
            b"<LinksUpToDate>false</LinksUpToDate><SharedDoc>false</SharedDoc>"
            b"<HyperlinksChanged>false</HyperlinksChanged></Properties>")


def _properties(doc, report: Report) -> None:
    """The file's properties from the report, none left from python-docx's template (its
    creator, its 2013 dates, its description, its blank thumbnail)."""
    props = doc.core_properties
    props.title = _safe(report.title or report.topic)[:255]
    props.subject = _safe(report.topic)[:255]
    props.author = props.last_modified_by = "researchflow"
    props.comments = f"researchflow report {report.report_id} · engine {report.engine}"
    props.keywords = f"researchflow report {report.report_id}"
    props.language = report.language
    props.revision = 1
    # Word writes these as UTC ("...Z") without converting: give it UTC.
    created = report.created_at or datetime.now(timezone.utc)
    if created.tzinfo is None:  # the store's TIMESTAMPTZ comes back aware; a bare one is UTC
        created = created.replace(tzinfo=timezone.utc)
    props.created = props.modified = created.astimezone(timezone.utc).replace(tzinfo=None)
    # The template's thumbnail is a blank page: readers would show it as the preview.
    package = doc.part.package
    for rid, rel in list(package.rels.items()):
        if rel.reltype == RELATIONSHIP_TYPE.THUMBNAIL:
            package.rels.pop(rid)
    # The extended properties named the template's "Microsoft Macintosh Word" 14.0 and its
    # empty page's counts: only what is true of this file. python-docx has no API for them.
    for part in package.iter_parts():
        if str(part.partname) == "/docProps/app.xml":
            part._blob = _APP_XML


def _block(doc, block: Block) -> None:
    if block.kind == "heading":
        paragraph = doc.add_heading(level=0 if block.level == 1 else min(block.level - 1, 9))
        _runs(paragraph, block.runs)
    elif block.kind == "paragraph":
        _runs(doc.add_paragraph(), block.runs)
    elif block.kind == "quote":
        _runs(doc.add_paragraph(style="Quote"), block.runs)
    elif block.kind == "item":
        style = "List Number" if block.ordered else "List Bullet"
        if block.level > 1:
            style += f" {min(block.level, 3)}"
        _runs(doc.add_paragraph(style=style), block.runs)
    elif block.kind == "code":
        _runs(doc.add_paragraph(), block.runs)
    elif block.kind == "table":
        _table(doc, block)
    elif block.kind == "rule":
        doc.add_paragraph("—" * 12)


def _table(doc, block: Block) -> None:
    columns = max([len(block.header)] + [len(r) for r in block.rows])
    table = doc.add_table(rows=1 + len(block.rows), cols=columns)
    table.style = "Table Grid"
    for c, cell in enumerate(block.header):
        paragraph = table.rows[0].cells[c].paragraphs[0]
        _runs(paragraph, tuple(Run(r.text, True, r.italic, r.code, r.link) for r in cell))
    header = table.rows[0]._tr.get_or_add_trPr()
    repeat = OxmlElement("w:tblHeader")  # the header row again on every page
    repeat.set(qn("w:val"), "true")
    header.append(repeat)
    for r, row in enumerate(block.rows, start=1):
        for c, cell in enumerate(row[:columns]):
            _runs(table.rows[r].cells[c].paragraphs[0], cell)
    doc.add_paragraph()


def _references(doc, references: References) -> None:
    doc.add_heading(references.heading, level=1)
    for c in references.citations:
        paragraph = doc.add_paragraph()
        _bookmark(paragraph, f"ref_{c.number}", c.number)
        _plain_run(paragraph, f"{c.number}. ")
        title = c.title or c.url
        if is_web_url(c.url):
            _hyperlink(paragraph, title, url=c.url)
        else:
            paragraph.add_run(_safe(title)).bold = True
        _plain_run(paragraph, "\n" + c.url, size=8, colour=RGBColor(0x66, 0x66, 0x66))
        if c.quote:
            quote = doc.add_paragraph(style="Quote")
            quote.add_run(_safe(f"“{c.quote}”"))


def _runs(paragraph: Paragraph, runs: Runs) -> None:
    for run in runs:
        if run.citation is not None:
            _hyperlink(paragraph, run.text, anchor=f"ref_{run.citation}", superscript=True)
        elif run.link:
            _hyperlink(paragraph, run.text, url=run.link, bold=run.bold, italic=run.italic)
        else:
            _text_run(paragraph, run)


def _text_run(paragraph: Paragraph, run: Run) -> None:
    parts = _safe(run.text).split("\n")
    for i, part in enumerate(parts):
        out = paragraph.add_run(part)
        out.bold, out.italic = run.bold or None, run.italic or None
        if run.code:
            out.font.name = _MONO
            out.font.highlight_color = WD_COLOR_INDEX.GRAY_25
        if i < len(parts) - 1:
            out.add_break()


def _plain_run(paragraph: Paragraph, text: str, *, size: float | None = None,
               colour: RGBColor | None = None) -> None:
    parts = _safe(text).split("\n")
    for i, part in enumerate(parts):
        if i:
            paragraph.add_run().add_break()
        run = paragraph.add_run(part)
        if size:
            run.font.size = Pt(size)
        if colour is not None:
            run.font.color.rgb = colour


def _hyperlink(paragraph: Paragraph, text: str, *, url: str | None = None,
               anchor: str | None = None, bold: bool = False, italic: bool = False,
               superscript: bool = False) -> None:
    """A w:hyperlink: to an external URL (a relationship of the part) or to a bookmark."""
    link = OxmlElement("w:hyperlink")
    if url is not None:
        rel = paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
        link.set(qn("r:id"), rel)
    else:
        link.set(qn("w:anchor"), anchor or "")
    run = OxmlElement("w:r")
    props = OxmlElement("w:rPr")
    colour = OxmlElement("w:color")
    colour.set(qn("w:val"), str(_LINK_COLOUR))
    props.append(colour)
    underline = OxmlElement("w:u")
    underline.set(qn("w:val"), "single")
    props.append(underline)
    for on, tag in ((bold, "w:b"), (italic, "w:i")):
        if on:
            props.append(OxmlElement(tag))
    if superscript:
        align = OxmlElement("w:vertAlign")
        align.set(qn("w:val"), "superscript")
        props.append(align)
    run.append(props)
    body = OxmlElement("w:t")
    body.text = _safe(text)
    body.set(qn("xml:space"), "preserve")
    run.append(body)
    link.append(run)
    paragraph._p.append(link)


def _bookmark(paragraph: Paragraph, name: str, number: int) -> None:
    start = OxmlElement("w:bookmarkStart")
    start.set(qn("w:id"), str(number))
    start.set(qn("w:name"), name)
    end = OxmlElement("w:bookmarkEnd")
    end.set(qn("w:id"), str(number))
    paragraph._p.append(start)
    paragraph._p.append(end)
