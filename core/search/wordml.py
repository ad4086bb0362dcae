"""A Word document's body read as a stream, in bounded memory.

python-docx parses `word/document.xml` as one tree: a 666 KB .docx whose document.xml unpacks
to 190 MB (2.2 million short paragraphs) cost 1.4 GB and over a minute per indexing worker.
Here the part is read with lxml's `iterparse`, and each body paragraph, table row and other body
element is dropped from the tree as soon as its text is taken, so memory stays that of one
element whatever the file's size. Reading stops after MAX_BLOCKS body paragraphs and table rows
(empty ones count: they cost time too) or once `max_chars` of text are read.

    blocks(archive, max_chars) -> iterator of Block(text, style), in document order

What is read, as python-docx reads it: the body's paragraphs (their runs' text, hyperlinks
included; a tab or line break is a space) and tables (a row is its cells joined by " | ", a
cell its paragraphs), not text boxes, content controls, headers, footers or comments. A
paragraph's style is its style's name as Word shows it ("Heading 1", "Title"). Entities are
never resolved and nothing is fetched (`resolve_entities=False`, `no_network=True`).

What it does not do: decide titles or headings (core.search.documents does), or open the zip.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

log = logging.getLogger(__name__)

MAX_BLOCKS = 200_000  # body paragraphs and table rows read per document
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
_BODY, _P, _TBL, _TR, _TC = W + "body", W + "p", W + "tbl", W + "tr", W + "tc"
_TEXT_BOX = W + "txbxContent"
_SPACES = {W + "tab", W + "br", W + "cr"}


@dataclass(frozen=True)
class Block:
    text: str  # a paragraph's text, or a table's rows joined by newlines
    style: str = ""  # a paragraph's style name; "" for a table


def _events(stream: IO[bytes], events: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    from lxml import etree

    return etree.iterparse(stream, events=events, resolve_entities=False, no_network=True,
                           load_dtd=False, huge_tree=False, remove_comments=True,
                           remove_pis=True)


def blocks(archive: zipfile.ZipFile, max_chars: int) -> Iterator[Block]:
    """The body's paragraphs and tables, in order, until MAX_BLOCKS or max_chars."""
    styles = _style_names(archive)
    rows: list[str] = []
    above: dict[int, str] = {}  # column -> the text a vertically merged cell repeats
    seen = size = 0
    with archive.open("word/document.xml") as stream:
        for _, element in _events(stream, ("end",)):
            tag, parent = element.tag, element.getparent()
            if tag == _TC:
                cell = " ".join(_paragraph_text(p) for p in element.iterchildren(_P))
                span, merge = _grid(element)
                element.clear()  # nested tables go with the rest, as python-docx reads a cell
                element.text = cell
                element.set("span", str(span))
                element.set("merge", merge)
                continue
            if tag == _TR and parent is not None and parent.tag == _TBL \
                    and _parent_tag(parent) == _BODY:
                rows.append(row(_cells(element, above)))
                parent.remove(element)
                seen += 1
            elif tag == _P and parent is not None and parent.tag != _TC \
                    and parent.tag != _BODY:
                parent.remove(element)  # a text box's or a content control's: not read
                continue
            elif parent is None or parent.tag != _BODY:
                continue
            else:  # a body-level paragraph, table or anything else
                block = None
                if tag == _P:
                    seen += 1
                    block = Block(_paragraph_text(element), _style(element, styles))
                elif tag == _TBL:
                    block, rows, above = Block("\n".join(rows)), [], {}
                parent.remove(element)
                if block is not None and block.text.strip():
                    size += len(block.text) + 2
                    yield block
                    if size > max_chars:
                        return
            if seen >= MAX_BLOCKS:
                log.info("%s: stopped reading after %s paragraphs and table rows",
                         archive.filename or "a .docx", f"{MAX_BLOCKS:,}")
                if rows:
                    yield Block("\n".join(rows))
                return


def core_title(archive: zipfile.ZipFile) -> str:
    """docProps/core.xml's dc:title, or ""."""
    try:
        stream = archive.open("docProps/core.xml")
    except KeyError:
        return ""
    with stream:
        try:
            for _, element in _events(stream, ("end",)):
                if element.tag == _DC_TITLE:
                    return element.text or ""
        except Exception:  # noqa: BLE001 - a broken property part only costs the title
            return ""
    return ""


def _style_names(archive: zipfile.ZipFile) -> dict[str, str]:
    """styleId -> the name Word shows ("heading 1" is shown "Heading 1")."""
    try:
        stream = archive.open("word/styles.xml")
    except KeyError:
        return {}
    names: dict[str, str] = {}
    with stream:
        for _, element in _events(stream, ("end",)):
            if element.tag == W + "style":
                found = element.find(W + "name")
                name = found.get(W + "val", "") if found is not None else ""
                if name.lower().startswith("heading ") or name.lower() == "title":
                    name = name[:1].upper() + name[1:]
                names[element.get(W + "styleId", "")] = name
                element.clear()
                if len(names) > MAX_BLOCKS:
                    break
    return names


def _style(paragraph: Any, styles: dict[str, str]) -> str:
    found = paragraph.find(f"{W}pPr/{W}pStyle")
    return styles.get(found.get(W + "val", ""), "") if found is not None else ""


def _paragraph_text(paragraph: Any) -> str:
    """Its runs' text (hyperlinks included, text boxes not), a tab or break as a space."""
    for box in list(paragraph.iter(_TEXT_BOX)):
        box.clear()  # python-docx leaves text boxes out too
    parts: list[str] = []
    for node in paragraph.iter():
        if node.tag == W + "t":
            parts.append(node.text or "")
        elif node.tag in _SPACES:
            parts.append(" ")
    return " ".join("".join(parts).split())


def _grid(cell: Any) -> tuple[int, str]:
    """(columns the cell spans, "restart" / "continue" / "" for a vertical merge)."""
    span = cell.find(f"{W}tcPr/{W}gridSpan")
    merge = cell.find(f"{W}tcPr/{W}vMerge")
    columns = int(span.get(W + "val", "1")) if span is not None and \
        span.get(W + "val", "1").isdigit() else 1
    how = "" if merge is None else ("restart" if merge.get(W + "val") == "restart"
                                    else "continue")
    return max(1, min(columns, 64)), how


def _cells(tr: Any, above: dict[int, str]) -> list[str]:
    """A row's cells as python-docx lists them: a cell spanning columns once per column, a
    vertically merged cell with the text of the cell it continues."""
    out: list[str] = []
    for tc in tr.iterchildren(_TC):
        column, span = len(out), int(tc.get("span", "1"))
        text = above.get(column, "") if tc.get("merge") == "continue" else (tc.text or "")
        if tc.get("merge") == "restart":
            above[column] = text
        out.extend([text] * span)
    return out


def _parent_tag(element: Any) -> str | None:
    parent = element.getparent()
    return parent.tag if parent is not None else None


def row(cells: Iterator[str] | Any) -> str:
    """A table row as its cells joined by " | ", a merged cell's text once."""
    out: list[str] = []
    for cell in cells:
        text = " ".join(cell.split())
        if not out or text != out[-1]:
            out.append(text)
    return " | ".join(out)
