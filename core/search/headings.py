"""The real headings of a document, placed in its extracted text: what its sections are called,
in its own words.

    html_headings(html, text)   h1-h3 of a page, placed where their sections start in the text
                                trafilatura extracted (which often drops the heading itself:
                                DocBook's title pages, for instance)
    parent_title(html)          the title of the page one up in the book, from its "up" link
    text_headings(text)         a markdown file's `#` lines and a reStructuredText file's
                                underlined titles
    within(headings, a, b)      the headings of text[a:b], shifted to it, the one in effect at
                                `a` first (at 0), so a window of a document keeps its sections

Word headings (Title, Heading N styles), PDF outline entries and slide titles are placed where
those documents are read (core.search.documents). A heading's text is shown without section
numbering ("30.5. WAL Configuration" is "WAL Configuration") or permalink marks ("¶").

What it does not do: judge whether a heading is any good (a heading is the document's), or
invent one for a document that has none.
"""

from __future__ import annotations

import html as htmllib
import re
from typing import Iterable, Sequence

from core.models import Heading, heading_chain

_HTML_HEADING = re.compile(r"<h([1-3])\b[^>]*>(.*?)</h\1\s*>", re.S | re.I)
_ANY_HEADING = re.compile(r"<h[1-6]\b[^>]*>.*?</h[1-6]\s*>", re.S | re.I)
SKIPPED = re.compile(r"<(script|style|nav|noscript)\b.*?</\1\s*>", re.S | re.I)
_TAG = re.compile(r"<[^>]+>")
_NUMBERING = re.compile(r"^(?:(?:chapter|part|appendix|section)\s+[\dIVXLC]+[.:]?\s+|"
                        r"[A-Z]?\d+(?:\.\d+)*\.?\s+|[A-Z]\.\d+(?:\.\d+)*\.?\s+|第\s*\d+\s*章\s*)",
                        re.I)
_MD = re.compile(r"^(#{1,3})\s+(\S.*?)\s*#*\s*$", re.M)
_RST_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`:.])\1{2,}\s*$")
MAX_HEADING = 200  # characters: a longer "heading" is a paragraph in heading markup
LOOKAHEAD = 3_000  # characters of markup after a heading searched for its first words
_PROBE = 40  # characters of a section's first line that place it in the text
_SHORT_PROBE = 16  # then fewer, when the first line reads otherwise in the text
_MIN_PROBE = 8  # a shorter probe is found anywhere
_PROBE_STARTS, _PROBE_SPAN = 6, 160  # later starts tried: after each of the first words
_UP_LINK = re.compile(r"<link\b([^>]*\brel=[\"']up[\"'][^>]*)>", re.I)
_UP_ANCHOR = re.compile(r"<a\b([^>]*\baccesskey=[\"']u[\"'][^>]*)>(.*?)</a\s*>", re.I | re.S)
_TITLE_ATTR = re.compile(r"\btitle=[\"']([^\"']*)[\"']", re.I)
_HREF_ATTR = re.compile(r"\bhref=[\"']([^\"']*)[\"']", re.I)
_BOOK_ROOT = re.compile(r"(?:^|/)index(?:\.[\w-]+)?\.html?(?:#.*)?$", re.I)
_OWN_TRIES = 20  # occurrences of a heading's name tried for its own line
_WORDY = re.compile(r"\w")  # what a heading's own line holds besides its name: no word
_OWN_CHECK = 3  # headings after one placed only by its own line, checked to come after it


_RST_ROLE = re.compile(r":[\w-]+:`([^`]*)`")


def clean(text: str) -> str:
    """A heading as shown: one line, without numbering, a permalink mark or reST markup."""
    text = _RST_ROLE.sub(r"\1", htmllib.unescape(text)).replace("`", "").replace(" --- ", " — ")
    text = " ".join(text.replace("¶", " ").split())
    return _NUMBERING.sub("", text).strip(" .:")[:MAX_HEADING]


class Squeezed:
    """A text without whitespace, each character's offset in the original kept, so a probe
    taken from other markup is found whatever the line breaks."""

    def __init__(self, text: str) -> None:
        kept = [(i, ch) for i, ch in enumerate(text) if not ch.isspace()]
        self.origin = [i for i, _ in kept]
        self.text = "".join(ch for _, ch in kept)

    def find(self, needle: str, at: int) -> int | None:
        """The offset in the original text where `needle` (squeezed) first occurs at or after
        original offset `at`; None when it does not."""
        span = self.span(needle, at)
        return span[0] if span else None

    def span(self, needle: str, at: int) -> tuple[int, int] | None:
        """(start, stop) in the original text of the first occurrence of `needle` (squeezed)
        at or after original offset `at`."""
        probe = "".join(needle.split())
        if not probe:
            return None
        lo = _first_at_or_after(self.origin, at)
        found = self.text.find(probe, lo)
        if found < 0:
            return None
        return self.origin[found], self.origin[found + len(probe) - 1] + 1


def _first_at_or_after(origin: Sequence[int], at: int) -> int:
    lo, hi = 0, len(origin)
    while lo < hi:
        mid = (lo + hi) // 2
        if origin[mid] < at:
            lo = mid + 1
        else:
            hi = mid
    return lo


def plain_text(fragment: str) -> str:
    """Markup as its text: tags as spaces, entities decoded."""
    return htmllib.unescape(_TAG.sub(" ", fragment))


def html_headings(html: str, text: str) -> tuple[Heading, ...]:
    """The page's h1-h3, each at the offset of `text` where its section starts: the heading
    itself when the extractor kept it as a line, else the first words that follow it in the
    markup. A heading whose section cannot be placed (boilerplate the extractor dropped) is
    left out; placed headings keep document order."""
    html = SKIPPED.sub(" ", html)
    squeezed = Squeezed(text)
    found = [(int(m.group(1)), clean(plain_text(m.group(2))), html[m.end():m.end() + LOOKAHEAD])
             for m in _HTML_HEADING.finditer(html)]
    found = [f for f in found if f[1]]
    out: list[Heading] = []
    at = 0
    for i, (level, name, after) in enumerate(found):
        own = _own_line(squeezed, text, name, at)
        if own is not None:
            # a line that only reads like this heading, past where the next sections start
            # (a chapter's title repeated in a table): taking it would lose those sections
            later = next((w for _l, _n, a in found[i + 1:i + 1 + _OWN_CHECK]
                          if (w := _first_words(squeezed, a, at)) is not None), None)
            own = None if later is not None and own > later else own
        where = own if own is not None else _first_words(squeezed, after, at)
        if where is None:
            continue
        out.append(Heading(start=where, level=level, text=name))
        at = where
    return tuple(out)


def parent_title(html: str) -> str:
    """The title of the page one up in the book ("Chapter 1. Getting Started" over PostgreSQL's
    "1.1. Installation", "Internet Data Handling" over Python's json), from the navigation's
    "up" link that DocBook and Sphinx write, shown like a heading. A chapter whose own page is
    only a table of contents is then named by the pages it lists."""
    for pattern in (_UP_LINK, _UP_ANCHOR):
        match = pattern.search(html)
        if match:
            attrs, label = match.group(1), match.group(2) if match.lastindex == 2 else ""
            href = _HREF_ATTR.search(attrs)
            if href and _BOOK_ROOT.search(href.group(1)):
                return ""  # the whole book ("Debian 参考手册") is every page's parent: no subject
            title = _TITLE_ATTR.search(attrs)
            name = clean(plain_text(title.group(1) if title else label))
            if name and name.lower() not in ("up", "home"):
                return name
    return ""


def _own_line(squeezed: Squeezed, text: str, name: str, at: int) -> int | None:
    """The heading kept as a line of its own: the line is the name, give or take numbering and
    marks. The name inside a sentence is a cross-reference ("see 2.1.4 “Debian 档案库基础”")
    pages later, and inside a caption ("表 11.10. XML 数据提取工具列表") a table's title:
    taking either would misplace this section and lose every section after it."""
    want = "".join(name.split())
    for _ in range(_OWN_TRIES):
        found = squeezed.find(name, at)
        if found is None:
            return None
        start = text.rfind("\n", 0, found) + 1
        stop = text.find("\n", found)
        line = "".join(clean(text[start:len(text) if stop < 0 else stop]).split())
        if not _WORDY.search(line.replace(want, "", 1)):
            return found
        at = found + 1
    return None


def _first_words(squeezed: Squeezed, after: str, at: int) -> int | None:
    """The first words under the heading, found in the text. A probe from their very start can
    miss: an admonition's label ("警告", "Note") or a table the extractor wrote otherwise
    opens the section, so later starts and a shorter probe are tried too."""
    body = " ".join(plain_text(_ANY_HEADING.sub(" ", after)).split())
    starts = [0] + [m.end() for m in re.finditer(" ", body[:_PROBE_SPAN])][:_PROBE_STARTS]
    for start in starts:
        for size in (_PROBE, _SHORT_PROBE):
            probe = body[start:start + size]
            if len("".join(probe.split())) >= _MIN_PROBE:
                found = squeezed.find(probe, at)
                if found is not None:
                    return found
    return None


def text_headings(text: str) -> tuple[Heading, ...]:
    """A markdown file's `#`, `##` and `###` lines and a reStructuredText file's titles (a line
    underlined, and maybe overlined, with one punctuation character: levels in order of first
    use, as reST assigns them)."""
    found: list[Heading] = [Heading(start=m.start(), level=len(m.group(1)), text=clean(m.group(2)))
                            for m in _MD.finditer(text)]
    styles: list[str] = []
    lines = text.splitlines(keepends=True)
    offset = 0
    starts = []
    for line in lines:
        starts.append(offset)
        offset += len(line)
    for i in range(1, len(lines)):
        under, title = lines[i].rstrip("\n"), lines[i - 1].strip()
        m = _RST_UNDERLINE.match(under)
        if not m or not title or _RST_UNDERLINE.match(title) or len(under.strip()) < len(title):
            continue
        overlined = i >= 2 and lines[i - 2].strip() == under.strip()
        style = ("over" if overlined else "") + m.group(1)
        if style not in styles:
            styles.append(style)
        level = styles.index(style) + 1
        if level <= 3:
            found.append(Heading(start=starts[i - 1], level=level, text=clean(title)))
    return tuple(sorted((h for h in found if h.text), key=lambda h: h.start))


def within(headings: Iterable[Heading], start: int, stop: int) -> tuple[Heading, ...]:
    """The headings of text[start:stop], shifted to it: those in effect at `start` (their
    chain, outermost first) placed at 0, then those inside the slice."""
    headings = list(headings)
    chain = heading_chain(headings, start)
    inside = [h.model_copy(update={"start": h.start - start}) for h in headings
              if start < h.start < stop]
    return tuple([c.model_copy(update={"start": 0}) for c in chain] + inside)
