"""A stored report as something to hand on: markdown, one self-contained HTML page, Word, PDF.

What it does: `to_markdown` gives the report's markdown as stored. `render(report, "docx")` and
`render(report, "pdf")` return the bytes of a Word document (core.reports.export_docx) and of a PDF
(core.reports.export_pdf), built from the same parse of the report (core.reports.export_blocks) with
the same link rules as the HTML page. `to_html` renders it with markdown-it-py into a page that
needs nothing else: inline CSS, no script, nothing fetched (a Content-Security-Policy forbids it
too), each citation marker `[n]` linked to `#ref-n`, and the references rebuilt from the report's
citations, each with its verbatim quote; a local corpus file is named by its path in the corpus
folder, not by the file: URL of the machine that ran the batch.

Hostile text: a report's prose and quotes come from web pages. Raw HTML is never passed through
(markdown-it's `html` option is off; titles and quotes are escaped), and only http and https URLs
become links, in the prose and in the references; any other scheme (javascript:, data:, file:)
stays visible text. An image becomes a link to it: displayed, it would be fetched.

What it does not do: read the store (the caller passes a `Report`) or write a file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.utils import EnvType, OptionsDict
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from core.models import Citation, Report
from core.reports.export_blocks import ExportError, is_web_url, shown_url, split_references

__all__ = ["BINARY", "ExportError", "Format", "is_web_url", "render", "to_html", "to_markdown"]

Format = Literal["md", "html", "docx", "pdf"]
BINARY = frozenset({"docx", "pdf"})  # formats whose `render` returns bytes


_MARKER = re.compile(r"\[(\d+)\]")

_CSS = """
body{margin:0;background:#fafafa;color:#1d1d1f;font:16px/1.6 system-ui,-apple-system,
"Segoe UI",Roboto,"Noto Sans","PingFang SC","Microsoft YaHei",sans-serif}
main{max-width:46rem;margin:0 auto;padding:2rem 1.25rem 3rem;background:#fff}
h1{font-size:1.8rem;line-height:1.25}h2{margin-top:2rem;border-bottom:1px solid #e5e5e5}
a{color:#0b57d0}a.cite{text-decoration:none;font-size:.85em;vertical-align:super}
blockquote{margin:.4rem 0 .2rem;padding:.1rem .9rem;border-left:3px solid #d0d7de;color:#444}
table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #d0d7de;padding:.3rem .6rem}
code{background:#f3f3f3;padding:0 .2rem}.url{color:#666;font-size:.85em;word-break:break-all}
ol.references li{margin-bottom:.8rem}ol.references li:target{background:#fff8c5}
footer{max-width:46rem;margin:0 auto;padding:1rem 1.25rem;color:#666;font-size:.85em}
"""


def render(report: Report, fmt: Format, *, pdf_font: str | None = None,
           corpus_dirs: Sequence[Path] = ()) -> str | bytes:
    """The report in `fmt`: text for md and html, bytes for docx and pdf. `pdf_font`: the font
    file to set a PDF in (None: core.reports.export_pdf.find_font's search). `corpus_dirs`: the
    corpus folders a local source may be under, to name it relative to its folder in html, docx
    and pdf (core.reports.export_blocks.shown_url); md stays as stored."""
    if fmt == "docx":
        from core.reports.export_docx import to_docx

        return to_docx(report, corpus_dirs=corpus_dirs)
    if fmt == "pdf":
        from core.reports.export_pdf import to_pdf

        return to_pdf(report, font=pdf_font, corpus_dirs=corpus_dirs)
    return to_html(report, corpus_dirs=corpus_dirs) if fmt == "html" else to_markdown(report)


def to_markdown(report: Report) -> str:
    """The stored markdown, unchanged."""
    return report.markdown


def to_html(report: Report, *, corpus_dirs: Sequence[Path] = ()) -> str:
    """One HTML page holding the whole report (see the module docstring)."""
    prose, heading = split_references(report.markdown) if report.citations else (
        report.markdown, None)
    numbers = {c.number for c in report.citations}
    body = _markdown().render(prose, {"citations": numbers})
    if report.citations:
        body += _references(report.citations, heading or "References", corpus_dirs)
    title = html.escape(report.title or report.topic)
    csp = "default-src 'none'; style-src 'unsafe-inline'"
    return (f'<!DOCTYPE html>\n<html lang="{html.escape(report.language)}">\n<head>\n'
            f'<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
            f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
            f"{body}</main>\n<footer>report {html.escape(report.report_id)} · engine "
            f"{html.escape(report.engine)}</footer>\n</body>\n</html>\n")


def _references(citations: tuple[Citation, ...], heading: str,
                corpus_dirs: Sequence[Path]) -> str:
    items = []
    for c in sorted(citations, key=lambda c: c.number):
        shown = shown_url(c.url, corpus_dirs)
        title, url = html.escape(c.title or shown), html.escape(shown)
        source = (f'<a href="{url}" rel="noopener noreferrer">{title}</a>' if is_web_url(c.url)
                  else f"<span>{title}</span>")
        quote = f"<blockquote>{html.escape(c.quote)}</blockquote>" if c.quote else ""
        items.append(f'<li id="ref-{c.number}" value="{c.number}">{source} '
                     f'<span class="url">{url}</span>{quote}</li>')
    return (f'<section id="references">\n<h2>{html.escape(heading)}</h2>\n'
            f'<ol class="references">\n' + "\n".join(items) + "\n</ol>\n</section>\n")


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    md.validateLink = lambda url: url.startswith("#") or is_web_url(url)
    # Before text_join: an escaped "\[3\]" is still a separate token there, so it stays text.
    md.core.ruler.before("text_join", "citation_links", _link_citations)
    return md


def _image_as_link(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                   env: EnvType) -> str:
    src = str(tokens[idx].attrGet("src") or "")  # validateLink has passed it: http(s) or #
    alt = self.renderInlineAsText(tokens[idx].children or [], options, env) or src
    return f'<a href="{html.escape(src)}" rel="noopener noreferrer">{html.escape(alt)}</a>'


def _link_citations(state: StateCore) -> None:
    """Turn `[n]` in plain text (not inside a link) into a link to reference n, when the report
    has a citation n; mark links that leave the page noopener."""
    numbers: set[int] = state.env.get("citations", set())
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        depth = 0
        for token in block.children:
            if token.type == "link_open":
                depth += 1
                if not str(token.attrGet("href") or "").startswith("#"):
                    token.attrSet("rel", "noopener noreferrer")
            elif token.type == "link_close":
                depth -= 1
            if token.type == "text" and not depth and "[" in token.content:
                children.extend(_cite(token.content, numbers))
            else:
                children.append(token)
        block.children = children


def _cite(text: str, numbers: set[int]) -> list[Token]:
    tokens: list[Token] = []
    last = 0
    for match in _MARKER.finditer(text):
        number = int(match.group(1))
        if number not in numbers:
            continue
        tokens.append(_text(text[last:match.start()]))
        link = Token("link_open", "a", 1)
        link.attrSet("href", f"#ref-{number}")
        link.attrSet("class", "cite")
        tokens += [link, _text(match.group(0)), Token("link_close", "a", -1)]
        last = match.end()
    tokens.append(_text(text[last:]))
    return [t for t in tokens if t.type != "text" or t.content]


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token
