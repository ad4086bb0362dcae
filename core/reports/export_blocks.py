"""A stored report as a list of blocks, for the renderers that are not HTML (Word, PDF).

    blocks, references = report_blocks(report)

The report's markdown is parsed with markdown-it-py (the parser `core.reports.export.to_html` uses,
raw HTML off) into headings, paragraphs, quotes, lists, tables, code and rules, each holding `Run`s
of text with their emphasis and link. The references section is not parsed: it is rebuilt from the
report's citations (number, title, url, verbatim quote), as the HTML export does.

Control characters are dropped (`clean`). The references' titles and quotes are reflowed
(`reflow`): a page's hard line breaks and indentation would otherwise break the quote's lines in
the document; the words stay as stored. A local corpus file is named relative to its corpus folder, not by
its file: URL on the machine that ran the batch (`shown_url`). Links follow the HTML export's rule: only http and
https URLs become links (in the prose and in the references); a citation marker `[n]` of a
known citation links to reference n ("#ref-n"); anything else (javascript:, data:, file:)
stays visible text. Text is never interpreted beyond
markdown: a renderer writes runs as text.

What it does not do: images (an image becomes a link to it, as in the HTML export), nested
tables, footnotes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from core.models import Citation, Report
from core.reports.report import reference_headings
from core.text import cjk

_MARKER = re.compile(r"\[(\d+)\]")
# The references section core.reports.report.assemble writes last, in any language a report may
# be written in: every export rebuilds it from the citations instead of parsing it.
_REFERENCES = re.compile(r"^##[ \t]+(" + "|".join(map(re.escape, reference_headings()))
                         + r")[ \t]*$", re.MULTILINE)
_NEXT_SECTION = re.compile(r"^##[ \t]", re.MULTILINE)
# Control characters page text may carry: no document format shows them, XML cannot hold them.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
_SPACES = re.compile(r"\s+")
# CJK punctuation and full-width forms: a line may break after "。" with no space either.
_CJK_PUNCTUATION = re.compile("[\u3000-\u303f\uff00-\uffef]")


class ExportError(Exception):
    """The report cannot be written in this format here; the message says what to do."""


def is_web_url(url: str) -> bool:
    """Whether `url` may become a link: http or https with a host."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc)


def shown_url(url: str, corpus_dirs: Sequence[Path] = ()) -> str:
    """How a reference names its source in a document someone forwards: a web URL as it is; a
    local corpus file (file:) by its path relative to the corpus folder it is under, else by
    its file name, with its page or part ("#page=2"): the batch machine's absolute paths mean
    nothing to the reader and tell them about that machine. Anything else as it is."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url
    if parts.scheme.lower() != "file" or not parts.path:
        return url
    path = PurePosixPath(unquote(parts.path))
    shown = path.name or url
    for folder in corpus_dirs:
        try:
            shown = path.relative_to(PurePosixPath(Path(folder).as_posix())).as_posix()
            break
        except ValueError:
            continue
    return shown + (f"#{parts.fragment}" if parts.fragment else "")


def split_references(markdown: str) -> tuple[str, str | None]:
    """The markdown without its (last) references section, and that section's heading."""
    found = list(_REFERENCES.finditer(markdown))
    if not found:
        return markdown, None
    start = found[-1]
    following = _NEXT_SECTION.search(markdown, start.end())
    rest = markdown[following.start():] if following else ""
    return markdown[:start.start()] + rest, start.group(1)


def clean(text: str) -> str:
    """Text without control characters (tabs and line ends stay)."""
    return _CONTROL.sub("", text)


def reflow(text: str) -> str:
    """`text` on one line for display: each run of whitespace (a page's hard line breaks and
    indentation) one space, none at the ends, and a line break between two CJK characters
    gone (the script puts no space there). Only what is shown changes: the stored quote, which
    verification compares with its page, stays as written."""
    return _SPACES.sub(_one_space, text).strip()


def _one_space(match: re.Match[str]) -> str:
    before = match.string[match.start() - 1] if match.start() else ""
    after = match.string[match.end()] if match.end() < len(match.string) else ""
    if ("\n" in match.group() or "\r" in match.group()) and _wide(before) and _wide(after):
        return ""
    return " "


def _wide(char: str) -> bool:
    return bool(char) and (cjk.RUN.match(char) is not None or _CJK_PUNCTUATION.match(char)
                           is not None)


@dataclass(frozen=True)
class Run:
    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    link: str | None = None  # an http(s) URL, or "#ref-<n>" for a citation marker

    @property
    def citation(self) -> int | None:
        return int(self.link[5:]) if self.link and self.link.startswith("#ref-") else None


Runs = tuple[Run, ...]


@dataclass(frozen=True)
class Block:
    kind: Literal["heading", "paragraph", "quote", "item", "table", "code", "rule"]
    runs: Runs = ()
    level: int = 0  # heading level; list nesting depth for an item
    ordered: bool = False  # for an item
    number: int = 0  # an ordered item's number
    header: tuple[Runs, ...] = ()  # a table's header cells
    rows: tuple[tuple[Runs, ...], ...] = ()  # a table's body rows

    @property
    def text(self) -> str:
        return "".join(r.text for r in self.runs)


@dataclass(frozen=True)
class References:
    heading: str
    citations: tuple[Citation, ...] = field(default_factory=tuple)


def report_blocks(report: Report, corpus_dirs: Sequence[Path] = ()
                  ) -> tuple[list[Block], References | None]:
    """The report's prose as blocks, and its references (None for a report without any), each
    URL as `shown_url` names it (`corpus_dirs`: the corpus folders the report's local files may
    be under)."""
    prose, heading = split_references(report.markdown) if report.citations else (
        report.markdown, None)
    numbers = {c.number for c in report.citations}
    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: is_web_url(url)
    blocks = _Walker(numbers).walk(md.parse(clean(prose)))
    # Titles and quotes reflowed for display (`reflow`); the report's own citations unchanged.
    cited = tuple(c.model_copy(update={"title": reflow(clean(c.title)), "url": clean(shown_url(c.url, corpus_dirs)),
                                       "quote": reflow(clean(c.quote))})
                  for c in sorted(report.citations, key=lambda c: c.number))
    refs = References(clean(heading or "References"), cited) if report.citations else None
    return blocks, refs


def plain(runs: Runs) -> str:
    return "".join(r.text for r in runs)


class _Walker:
    def __init__(self, numbers: set[int]) -> None:
        self.numbers = numbers
        self.out: list[Block] = []
        self.quote = 0
        self.lists: list[list[int]] = []  # per open list: [ordered, next number]
        self.item_pending = False

    def walk(self, tokens: list[Token]) -> list[Block]:
        i = 0
        while i < len(tokens):
            i = self._block(tokens, i)
        return self.out

    def _block(self, tokens: list[Token], i: int) -> int:
        t = tokens[i]
        if t.type == "heading_open":
            self.out.append(Block("heading", self._inline(tokens[i + 1]), level=int(t.tag[1])))
            return i + 3
        if t.type == "paragraph_open":
            runs = self._inline(tokens[i + 1])
            if self.lists and self.item_pending:  # the first paragraph of a list item
                ordered, number = self.lists[-1]
                self.out.append(Block("item", runs, level=len(self.lists), ordered=bool(ordered),
                                      number=number))
                self.lists[-1][1] += 1
                self.item_pending = False
            else:
                self.out.append(Block("quote" if self.quote else "paragraph", runs))
            return i + 3
        if t.type == "blockquote_open":
            self.quote += 1
        elif t.type == "blockquote_close":
            self.quote -= 1
        elif t.type in ("bullet_list_open", "ordered_list_open"):
            start = int(t.attrGet("start") or 1) if t.type == "ordered_list_open" else 0
            self.lists.append([t.type == "ordered_list_open", start])
        elif t.type in ("bullet_list_close", "ordered_list_close"):
            self.lists.pop()
        elif t.type == "list_item_open":
            self.item_pending = True
        elif t.type == "table_open":
            return self._table(tokens, i)
        elif t.type in ("fence", "code_block"):
            self.out.append(Block("code", (Run(t.content.rstrip("\n"), code=True),)))
        elif t.type == "hr":
            self.out.append(Block("rule"))
        return i + 1

    def _table(self, tokens: list[Token], i: int) -> int:
        header: list[Runs] = []
        rows: list[tuple[Runs, ...]] = []
        row: list[Runs] = []
        in_head = False
        while tokens[i].type != "table_close":
            t = tokens[i]
            if t.type == "thead_open":
                in_head = True
            elif t.type == "thead_close":
                in_head = False
            elif t.type == "tr_open":
                row = []
            elif t.type == "tr_close":
                if in_head:
                    header = row
                else:
                    rows.append(tuple(row))
            elif t.type == "inline":
                row.append(self._inline(t))
            i += 1
        self.out.append(Block("table", header=tuple(header), rows=tuple(rows)))
        return i + 1

    def _inline(self, token: Token) -> Runs:
        runs: list[Run] = []
        bold = italic = False
        link: str | None = None
        for child in token.children or []:
            kind = child.type
            if kind == "strong_open":
                bold = True
            elif kind == "strong_close":
                bold = False
            elif kind == "em_open":
                italic = True
            elif kind == "em_close":
                italic = False
            elif kind == "link_open":
                link = str(child.attrGet("href") or "") or None
            elif kind == "link_close":
                link = None
            elif kind == "code_inline":
                runs.append(Run(child.content, bold, italic, code=True, link=link))
            elif kind in ("softbreak",):
                runs.append(Run(" ", bold, italic, link=link))
            elif kind == "hardbreak":
                runs.append(Run("\n", bold, italic))
            elif kind == "image":
                src = str(child.attrGet("src") or "")
                alt = child.content or src
                runs.append(Run(alt, bold, italic, link=src or None))
            elif kind == "text":
                runs.extend(self._text(child.content, bold, italic, link))
        return tuple(_merge(runs))

    def _text(self, text: str, bold: bool, italic: bool, link: str | None) -> list[Run]:
        if link is not None or "[" not in text:
            return [Run(text, bold, italic, link=link)]
        out: list[Run] = []
        last = 0
        for match in _MARKER.finditer(text):
            number = int(match.group(1))
            if number not in self.numbers:
                continue
            out.append(Run(text[last:match.start()], bold, italic))
            out.append(Run(match.group(0), bold, italic, link=f"#ref-{number}"))
            last = match.end()
        out.append(Run(text[last:], bold, italic))
        return [r for r in out if r.text]


def _merge(runs: list[Run]) -> list[Run]:
    """Neighbouring runs of the same style become one (fewer runs in the output file)."""
    out: list[Run] = []
    for run in runs:
        if out and (out[-1].bold, out[-1].italic, out[-1].code, out[-1].link) == (
                run.bold, run.italic, run.code, run.link) and run.citation is None \
                and out[-1].citation is None:
            out[-1] = Run(out[-1].text + run.text, run.bold, run.italic, run.code, run.link)
        else:
            out.append(run)
    return out
