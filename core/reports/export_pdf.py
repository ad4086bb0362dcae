"""A stored report as a PDF, written with fpdf2 (pure Python) in an embedded TrueType font.

    data = to_pdf(report, font=None)   # bytes of a PDF file

The PDF has the report's title, language, author "researchflow" and creation time (when the
report was stored) in its metadata, headings in sizes of their level
(and as the document outline, so a reader's sidebar lists them), paragraphs, the quotes set off
in grey, lists, the comparison table as a ruled table with a header row repeated on each page,
and the references rebuilt from the citations: numbered, the title linked to the source when it
is an http(s) URL, the URL in full (a local corpus file by its path in the corpus folder) and
the quote as written. A citation marker `[n]` in the
prose or in a table cell links to reference n inside the document. Link rules are those of
`core.reports.export_blocks`.

The font: a PDF can only show the glyphs of the fonts it embeds, so the text must be set in one
that covers it. `find_font` takes, in order: `font` (RESEARCHFLOW_PDF_FONT), then the first
TrueType font with CJK coverage that Debian packages install (fonts-wqy-microhei,
fonts-wqy-zenhei, fonts-droid-fallback, fonts-arphic-uming), then a Latin one (fonts-dejavu-core,
fonts-liberation). Only glyphs the report uses are embedded (fpdf2 subsets the font). A report
with Chinese, Japanese or Korean the chosen font lacks is refused (ExportError: what to
install), since most of it would be blank; other characters the font lacks are left blank and
logged with what to install. fpdf2 2.8.9 embeds CFF-outline fonts (OpenType .otf/.otc, such as
Noto Sans CJK) with wrong glyph widths, so those are refused: use TrueType outlines (.ttf/.ttc).

Lines break at spaces and, in Chinese and Japanese, between any two characters, with the usual
no-break rules for punctuation (core.text.cjk.breakable).

The font file has one face: bold is drawn by stroking the glyphs' outline too; italic is shown
upright. What it does not do: images, right-to-left scripts, page numbers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import timezone
from pathlib import Path

from fpdf import FPDF
from fpdf.enums import MethodReturnValue, TextMode

from core.reports.export_blocks import (Block, ExportError, References, Run, Runs, is_web_url,
                                        plain, report_blocks)
from core.models import Report
from core.text.cjk import ZWSP, breakable, has_cjk

log = logging.getLogger("researchflow.export")

# TrueType outlines only (see the module docstring); CJK first, then Latin.
SYSTEM_FONTS = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
    "/usr/share/fonts/truetype/arphic/uming.ttc",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
)
FONT_HINT = ("install a Unicode TrueType font (Debian: apt-get install fonts-wqy-microhei, "
             "which covers Chinese, Japanese and Korean too) or set RESEARCHFLOW_PDF_FONT to "
             "a .ttf/.ttc file")
_SIZES = {1: 20.0, 2: 15.0, 3: 12.5}
_BODY = 10.5
_LINE = 5.6
_CELL = 8.5  # a table cell's font size, line height and padding
_CELL_LINE = 4.6
_PAD = 1.5
_LINK = (11, 87, 208)
_GREY = (90, 90, 90)


def find_font(font: str | os.PathLike[str] | None = None) -> Path:
    """The font file to set the PDF in (see the module docstring); ExportError when none."""
    if font:
        path = Path(font).expanduser()
        if not path.is_file():
            raise ExportError(f"RESEARCHFLOW_PDF_FONT={font}: no such file")
        if path.suffix.lower() not in (".ttf", ".ttc"):
            raise ExportError(f"{path.name}: use a TrueType font (.ttf or .ttc); fpdf2 writes "
                              "OpenType CFF fonts (.otf/.otc) with wrong glyph widths")
        return path
    for candidate in SYSTEM_FONTS:
        if Path(candidate).is_file():
            return Path(candidate)
    raise ExportError("no Unicode font to embed in the PDF: " + FONT_HINT)


def to_pdf(report: Report, *, font: str | os.PathLike[str] | None = None,
           corpus_dirs: Sequence[Path] = ()) -> bytes:
    """The report as the bytes of a PDF file (see the module docstring); `corpus_dirs`: see
    core.reports.export_blocks.shown_url."""
    blocks, references = report_blocks(report, corpus_dirs)
    path = find_font(font)
    pdf = _PDF(format="A4")
    pdf.set_margins(20, 18, 20)
    pdf.set_auto_page_break(True, margin=18)
    pdf.set_title(report.title or report.topic)
    pdf.set_subject(report.topic[:255])
    pdf.set_lang(report.language)
    pdf.set_creator("researchflow")
    pdf.set_author("researchflow")
    if report.created_at is not None:  # the report's time, as in the Word file (fpdf2: now)
        created = report.created_at
        pdf.set_creation_date(created if created.tzinfo else created.replace(tzinfo=timezone.utc))
    for style in ("", "B"):  # one face (the table's header asks for "B"): see _Writer.runs
        pdf.add_font("body", style, str(path))
    _check_glyphs(pdf, path, blocks, references)
    writer = _Writer(pdf, references)
    pdf.add_page()
    for block in blocks:
        writer.block(block)
    if references is not None:
        titled = any(b.kind == "heading" and b.level == 1 for b in blocks)
        writer.references(references, level=1 if titled else 0)
    pdf.ln(6)
    pdf.set_font("body", size=7.5)
    pdf.set_text_color(*_GREY)
    pdf.multi_cell(0, 4, f"report {report.report_id} · engine {report.engine}")
    return bytes(pdf.output())


class _PDF(FPDF):
    """fpdf2's FPDF, whose lines may break between CJK characters: fpdf2 breaks only at spaces,
    so a line ended early before a long run of Chinese. The text carries zero-width spaces
    where a break is allowed (core.text.cjk.breakable); fpdf2 breaks at them and this drops
    them when it draws a line, so that the PDF's text copies and searches as written."""

    def _render_styled_text_line(self, text_line, *args, **kwargs):
        for fragment in text_line.fragments:
            if ZWSP in fragment.characters:
                fragment.characters = [c for c in fragment.characters if c != ZWSP]
        return super()._render_styled_text_line(text_line, *args, **kwargs)


class _Writer:
    def __init__(self, pdf, references: References | None) -> None:
        self.pdf = pdf
        # Named destinations: a marker may point at a reference not written yet.
        self.links = {c.number: f"#ref-{c.number}" for c in references.citations} \
            if references else {}

    def block(self, block: Block) -> None:
        pdf = self.pdf
        if block.kind == "heading":
            size = _SIZES.get(block.level, _BODY + 1)
            pdf.ln(3 if block.level > 1 else 0)
            pdf.start_section(plain(block.runs)[:200], level=max(block.level - 1, 0))
            self.runs(block.runs, size=size, height=size * 0.5, colour=(20, 20, 20))
            pdf.ln(2)
        elif block.kind == "paragraph":
            self.runs(block.runs)
        elif block.kind == "quote":
            self.indented(6, lambda: self.runs(block.runs, colour=_GREY))
        elif block.kind == "item":
            bullet = f"{block.number}. " if block.ordered else "• "
            self.indented(5 * block.level, lambda: self.runs((Run(bullet),) + block.runs))
        elif block.kind == "code":
            self.indented(4, lambda: self.runs(block.runs, size=9, colour=(60, 60, 60)))
        elif block.kind == "table":
            self.table(block)
        elif block.kind == "rule":
            y = pdf.get_y() + 2
            pdf.line(pdf.l_margin, y, pdf.w - pdf.r_margin, y)
            pdf.ln(5)

    def runs(self, runs: Runs, *, size: float = _BODY, height: float = _LINE,
             colour: tuple[int, int, int] = (29, 29, 31)) -> None:
        """The runs as a paragraph: written, then the next line."""
        self.write(runs, size=size, height=height, colour=colour)
        self.pdf.ln(height + 2.2)

    def write(self, runs: Runs, *, size: float = _BODY, height: float = _LINE,
              colour: tuple[int, int, int] = (29, 29, 31)) -> None:
        """The runs from the current position, wrapped at the margins, each link its own."""
        pdf = self.pdf
        pdf.set_font("body", size=size)
        previous = ""  # the last character written: a break may come before this run
        for run in _glued(runs):
            link: str | int = ""
            if run.citation is not None:
                link = self.links.get(run.citation, "")
            elif run.link:
                link = run.link
            shade = _LINK if link else colour
            pdf.set_text_color(*shade)
            pdf.set_font("body", size=size * (0.8 if run.citation is not None else 1.0))
            if run.bold:  # the font has one face: bold is its outline stroked as well
                pdf.set_draw_color(*shade)
                pdf.set_line_width(size * 0.012)
                pdf.text_mode = TextMode.FILL_STROKE
            # A citation marker stays on its sentence's line.
            text = breakable(run.text, "" if run.citation is not None else previous)
            previous = run.text[-1:] or previous
            pdf.write(height, text, link=link)
            pdf.text_mode = TextMode.FILL
            pdf.set_line_width(0.2)  # fpdf2's default, for rules and table borders
        pdf.set_text_color(*colour)

    def indented(self, by: float, write) -> None:
        pdf = self.pdf
        pdf.set_left_margin(pdf.l_margin + by)
        pdf.set_x(pdf.l_margin)
        try:
            write()
        finally:
            pdf.set_left_margin(pdf.l_margin - by)
            pdf.set_x(pdf.l_margin)

    def table(self, block: Block) -> None:
        """A ruled table drawn cell by cell with `write`, so that each `[n]` in a cell links to
        its reference as in the prose (fpdf2's own table takes one link per cell). Columns
        share the width; the bold header row is drawn again on each page the table goes on."""
        pdf = self.pdf
        columns = max([len(block.header)] + [len(r) for r in block.rows])
        width = pdf.epw / columns
        header = [tuple(Run(r.text, True, r.italic, r.code, r.link) for r in cell)
                  for cell in _padded(block.header, columns)] if block.header else []
        if header:
            self._row(header, width, header=True)
        for body in block.rows:
            cells = _padded(body, columns)
            if pdf.will_page_break(self._row_height(cells, width)):
                pdf.add_page()
                if header:
                    self._row(header, width, header=True)
            self._row(cells, width)
        pdf.ln(4)

    def _row_height(self, cells: list[Runs], width: float) -> float:
        """At least the row's height: multi_cell's dry run on the plain text, in a column a
        little narrower than `write`'s and with the citations at full size."""
        pdf = self.pdf
        pdf.set_font("body", size=_CELL)
        lines = max(len(pdf.multi_cell(width - 2 * _PAD, _CELL_LINE,
                                       breakable(plain(cell)) or " ",
                                       dry_run=True, output=MethodReturnValue.LINES))
                    for cell in cells)
        return lines * _CELL_LINE + 2 * _PAD

    def _row(self, cells: list[Runs], width: float, *, header: bool = False) -> None:
        pdf = self.pdf
        if pdf.will_page_break(self._row_height(cells, width)):
            pdf.add_page()
        left, right, top = pdf.l_margin, pdf.r_margin, pdf.get_y()
        bottom = top + _CELL_LINE + 2 * _PAD
        breaks = pdf.auto_page_break
        pdf.set_auto_page_break(False, margin=pdf.b_margin)  # the row was checked to fit
        try:
            for i, cell in enumerate(cells):
                x = left + i * width
                pdf.set_left_margin(x + _PAD)
                pdf.set_right_margin(pdf.w - x - width + _PAD)
                pdf.set_xy(x + _PAD, top + _PAD)
                if cell:
                    self.write(cell, size=_CELL, height=_CELL_LINE)
                    bottom = max(bottom, pdf.get_y() + _CELL_LINE + _PAD)
        finally:
            pdf.set_left_margin(left)
            pdf.set_right_margin(right)
            pdf.set_auto_page_break(breaks, margin=pdf.b_margin)
        pdf.set_draw_color(150, 150, 150)
        for i in range(len(cells)):
            pdf.rect(left + i * width, top, width, bottom - top)
        if header:  # a heavier rule under the header row
            pdf.set_line_width(0.5)
            pdf.line(left, bottom, left + len(cells) * width, bottom)
            pdf.set_line_width(0.2)
        pdf.set_draw_color(0, 0, 0)
        pdf.set_xy(left, bottom)

    def references(self, references: References, *, level: int) -> None:
        pdf = self.pdf
        pdf.ln(3)
        pdf.start_section(references.heading, level=level)
        self.runs((Run(references.heading),), size=_SIZES[2], height=_SIZES[2] * 0.5)
        for c in references.citations:
            pdf.set_link(name=f"ref-{c.number}", y=pdf.get_y(), page=pdf.page)
            title = c.title or c.url
            self.runs((Run(f"{c.number}. "),
                       Run(title, link=c.url if is_web_url(c.url) else None)))
            self.indented(6, lambda: self.runs((Run(c.url),), size=7.5, height=4,
                                               colour=_GREY))
            if c.quote:
                self.indented(6, lambda: self.runs((Run(f"“{c.quote}”"),), size=9.5,
                                                   colour=_GREY))


def _glued(runs: Runs) -> Runs:
    """Each run takes the space before it from the run before, so a line may break between two
    runs ("at each *await*", "memory. [3]"): fpdf2 breaks a run inside a word when the run has
    no space left to break at."""
    out: list[Run] = []
    for run in runs:
        if out and out[-1].text.endswith(" ") and not run.text.startswith(" "):
            last = out.pop()
            if last.text.rstrip(" "):
                out.append(Run(last.text.rstrip(" "), last.bold, last.italic, last.code,
                               last.link))
            run = Run(" " + run.text, run.bold, run.italic, run.code, run.link)
        out.append(run)
    return tuple(out)


def _padded(cells: tuple[Runs, ...], columns: int) -> list[Runs]:
    return list(cells[:columns]) + [()] * (columns - len(cells))


def _check_glyphs(pdf, path: Path, blocks: list[Block], references: References | None) -> None:
    """Log the characters of the report that the font cannot show, and what to do."""
    font = pdf.fonts.get("body")
    cmap = font.ttfont.getBestCmap() if font is not None else None
    if not cmap:
        return
    texts = [plain(b.runs) for b in blocks] + [plain(c) for b in blocks
                                               for row in ((b.header,) + b.rows) for c in row]
    if references is not None:
        texts += [f"{c.title} {c.url} {c.quote}" for c in references.citations]
    missing = sorted({ch for text in texts for ch in text
                      if not ch.isspace() and ord(ch) not in cmap})
    if not missing:
        return
    shown = "".join(missing[:20]) + ("…" if len(missing) > 20 else "")
    if has_cjk(shown):  # most of a Chinese report would be blank: not a document to send
        raise ExportError(f"the PDF font {path.name} has no Chinese, Japanese or Korean "
                          f"glyphs ({len(missing)} characters of this report, e.g. "
                          f"{shown[:8]}): {FONT_HINT}")
    log.warning("the PDF font %s has no glyph for %d character(s) of this report (%s): "
                "they are left blank; %s", path.name, len(missing), shown, FONT_HINT)
