"""Sections of a long HTML page that trafilatura dropped, put back where they stood.

trafilatura judges a page as a whole, and on long manuals of many sections (Debian Reference
holds a chapter per page) it leaves out whole sections: `6.3.9. SSH 故障排查` and its three
paragraphs are missing from its text of ch06, so a question about it finds no page. Run on one
section at a time, it keeps them. For a corpus page with enough headings, each section (the markup
from one h1-h3 to the next) is extracted on its own; a section whose text is mostly absent from
the whole-page text is inserted after the last line of the section before it. Sections trafilatura
kept are left as it wrote them, so the pages it reads well do not change.

Only the corpus uses this: a local manual's sections are content, while a web page's lesser
sections are often boilerplate that trafilatura was right to drop.
"""

from __future__ import annotations

import re

import trafilatura

from core.search.headings import SKIPPED, Squeezed, plain_text

MIN_SECTIONS = 4  # fewer headings: a short page, which trafilatura reads whole
_HEADING = re.compile(r"<h[1-3]\b", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_MIN_LINE = 8  # shorter lines ("Note", a bullet) say nothing about whether a section was kept
_NEAR = 200  # characters past the cursor where a short line of a kept section is taken as its own
_FAR = 3_000  # ... and a longer line
_LOST = 0.5  # a section is lost when less than this share of its text is in the page's text
_LINKED = 0.5  # a section is navigation when more than this share of its text is link text
# An anchor with text; never an XHTML target `<a id="x"/>`, which would run on to the next </a>.
_LINK = re.compile(r"<a\b[^>]*(?<!/)>(.*?)</a\s*>", re.IGNORECASE | re.DOTALL)
_TABLE = re.compile(r"<table\b.*?</table\s*>", re.IGNORECASE | re.DOTALL)
# A lost section worth restoring says something: a line ending as a sentence does. A navigation
# bar ("Navigation / index / modules / 3.11.2 Documentation / »") only names places.
_SENTENCE_END = tuple(".。!?！？:：;；)）\"”")


def restore_sections(html: str, text: str) -> str:
    """`text` (trafilatura's text of the whole page) with the sections it dropped put back."""
    html = SKIPPED.sub(" ", html)
    cuts = [m.start() for m in _HEADING.finditer(html)]
    if len(cuts) < MIN_SECTIONS:
        return text
    squeezed = _SPACE.sub("", text)
    placed = Squeezed(text)
    inserts: list[tuple[int, str]] = []
    cursor = 0
    for start, stop in zip(cuts, [*cuts[1:], len(html)]):
        fragment = html[start:stop]
        lines = _section_lines(fragment)
        telling = [key for key in map(_key, lines) if len(key) >= _MIN_LINE]
        if not telling:
            continue
        kept = sum(len(key) for key in telling if key in squeezed)
        if kept < _LOST * sum(map(len, telling)):
            if _says_something(telling) and not _mostly_links(fragment):
                inserts.append((cursor, "\n".join(lines)))
            continue
        for line in lines:  # advance past this section's lines, as the whole text has them
            if line.startswith("|"):
                continue  # a table's rows repeat from table to table ("| 软件包 | 流行度 |")
            found = placed.span(line, cursor)  # whatever line breaks the extractor kept
            # a short line ("foo", "$ ls") only where it follows closely, any line within reach:
            # the same words further on are another section's
            reach = _FAR if len(_key(line)) >= _MIN_LINE else _NEAR
            if found and found[0] - cursor <= reach:
                cursor = _line_end(text, found[1])
    return _insert(text, inserts) if inserts else text


def _says_something(keys: list[str]) -> bool:
    return any(key.endswith(_SENTENCE_END) for key in keys)


def _mostly_links(fragment: str) -> bool:
    """A table of contents or a navigation bar: outside its tables, most of its words are link
    text. trafilatura was right to drop it, and its lines would hold every heading of the page.
    A table of linked names (Debian's packages under "9.3.9. 记录配置文件的变更") is content."""
    prose = _TABLE.sub(" ", fragment)
    words = len(_SPACE.sub("", plain_text(prose)))
    linked = sum(len(_SPACE.sub("", plain_text(m.group(1)))) for m in _LINK.finditer(prose))
    return words > 0 and linked > _LINKED * words


def _section_lines(fragment: str) -> list[str]:
    try:
        doc = trafilatura.bare_extraction(f"<html><body>{fragment}</body></html>",
                                          include_comments=False, include_tables=True,
                                          with_metadata=False)
    except Exception:  # noqa: BLE001 - a section we cannot parse is one we cannot restore
        return []
    found = (getattr(doc, "text", None) or "") if doc is not None else ""
    return [line.strip() for line in found.splitlines() if line.strip()]


def _key(line: str) -> str:
    return _SPACE.sub("", line.strip().removeprefix("- "))


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _insert(text: str, inserts: list[tuple[int, str]]) -> str:
    out, done = [], 0
    for at, block in inserts:
        out.append(text[done:at])
        head = "" if at == 0 or text[at - 1:at] == "\n" else "\n"
        tail = "" if text[at:at + 1] == "\n" or at == len(text) else "\n"
        out.append(f"{head}{block}{tail}")
        done = at
    out.append(text[done:])
    return "".join(out)
