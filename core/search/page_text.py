"""Text handling shared by the search backends: HTML to text, natural cut points, snippets.

What it does: decode page bytes robustly, run trafilatura on HTML, split text into passages at
line boundaries, trim text at a paragraph or sentence boundary, and pick the sentence that best
matches a query. Every passage, trimmed text and snippet is a verbatim substring of its input, so
a quote taken from it can always be found again in the source text.

What it does not do: any I/O (fetching lives in `web`, indexing in `corpus`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import trafilatura
from trafilatura.utils import decode_file

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+")
_TITLE_TAG = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Extracted:
    title: str
    text: str


def decode_body(body: bytes, charset: str | None = None) -> str:
    """Bytes to str. Valid UTF-8 wins even over a declared charset (servers mislabel pages far
    more often than they serve Latin-1 that happens to be valid UTF-8); then the declared charset;
    then trafilatura's detection, which never raises."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if charset:
        try:
            return body.decode(charset)
        except (LookupError, UnicodeDecodeError):
            pass
    return decode_file(body)


def looks_binary(body: bytes) -> bool:
    """True for bytes that are not text in any encoding: NULs or many control characters."""
    sample = body[:8192]
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13))
    return controls / len(sample) > 0.05


def html_title(html: str | bytes) -> str:
    raw = html.encode("utf-8", "replace") if isinstance(html, str) else html
    match = _TITLE_TAG.search(raw[:200_000])
    if not match:
        return ""
    return " ".join(decode_body(match.group(1)).split())[:300]


def extract_html(html: str, url: str | None = None) -> Extracted | None:
    """Main text and title of an HTML page, or None when trafilatura finds no text.

    trafilatura can raise on pathological markup (deep nesting, odd encodings); a page we cannot
    parse is a page without text, never a crash."""
    try:
        doc = trafilatura.bare_extraction(html, url=url, include_comments=False,
                                          include_tables=True, with_metadata=True)
    except Exception:  # noqa: BLE001 - any parser failure means "no text", see docstring
        return None
    text = (getattr(doc, "text", None) or "").strip() if doc is not None else ""
    if not text:
        return None
    title = _title_of(html, (getattr(doc, "title", None) or "").strip())
    return Extracted(title=" ".join(title.replace("¶", " ").split())[:300], text=text)


def _title_of(html: str, found: str) -> str:
    """trafilatura's title, which drops a site's name from <title> ("Foo | Site" is Foo);
    but when it shares no word with <title> it took a heading inside the page ("Warning", an
    admonition of PostgreSQL's MERGE page), and <title> is the page's."""
    declared = html_title(html)
    if not found or not declared:
        return found or declared
    words = lambda text: {w.lower() for w in _WORD.findall(text)}  # noqa: E731
    return found if words(found) & words(declared) else declared


def first_line_title(text: str) -> str:
    """Title of a plain-text or markdown document: its first heading, else its first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines[:40]:
        if line.startswith("#"):
            return line.lstrip("#").strip()[:300]
    return lines[0][:300] if lines else ""


def trim_text(text: str, max_chars: int) -> str:
    """`text` cut to at most max_chars, at a paragraph, then sentence, then word boundary, as long
    as that keeps at least half the budget; a hard cut otherwise."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    floor = max_chars // 2
    for cut in (head.rfind("\n\n"), head.rfind("\n")):
        if cut >= floor:
            return head[:cut].rstrip()
    ends = [m.start() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= floor:
        return head[:ends[-1]].rstrip()
    space = head.rfind(" ")
    return head[:space].rstrip() if space >= floor else head


def split_passages(text: str, target: int = 1500, hard_max: int = 3000) -> list[tuple[int, int]]:
    """(start, stop) offsets of consecutive passages of about `target` chars.

    Cuts fall on line ends, preferring blank lines; a single line longer than hard_max is cut at
    sentence or word boundaries. Offsets (not copies) keep every passage a verbatim slice."""
    spans: list[tuple[int, int]] = []
    start = 0
    n = len(text)
    while start < n:
        if n - start <= hard_max:
            stop = n
        else:
            window = text[start:start + hard_max]
            stop = -1
            for sep in ("\n\n", "\n"):
                cut = window.rfind(sep, 0, target + (hard_max - target) // 2)
                if cut > target // 3:
                    stop = start + cut + len(sep)
                    break
            if stop < 0:
                stop = max(start + len(trim_text(window, target)), start + 1)
        if text[start:stop].strip():
            spans.append((start, stop))
        start = stop
    return spans


_CODE_NAME = re.compile(r"(?<![\w.])(?:[A-Za-z_][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+"
                        r"|[A-Za-z]+[0-9][A-Za-z0-9]*)(?!\w)")


def code_names(text: str) -> list[str]:
    """Names written as code, lower-cased, in order, repeats kept: pg_am, os.path.join,
    SPI_cursor_open, sqlite3, base64. A word index keeps letters only ("pg_am" is pg, and am
    is a stop word), so the exact-term index (beside the CJK bigrams) holds them whole."""
    names = (m.group().lower() for m in _CODE_NAME.finditer(text))
    return [n for n in names if max(map(len, re.split(r"[_.]", n))) > 1]  # not "e.g"


def query_terms(query: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(query) if len(w) > 1 or w.isdigit()]


def best_sentence(text: str, query: str, max_chars: int = 300) -> str:
    """The sentence of `text` sharing the most words with `query` (crude prefix match stands in
    for stemming), cut to max_chars; the first sentence when nothing matches. Verbatim."""
    terms = {t[:5] for t in query_terms(query)}
    best, best_score = "", -1
    for piece in _split_sentences(text):
        stripped = piece.strip()
        if len(stripped) < 20 and best:
            continue  # headings and fragments make poor snippets
        words = {w.lower()[:5] for w in _WORD.findall(stripped)}
        score = len(terms & words)
        if score > best_score:
            best, best_score = stripped, score
    if not best:
        best = text.strip()
    if len(best) > max_chars:
        best = trim_text(best, max_chars)
    return best


def _split_sentences(text: str) -> list[str]:
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        start = 0
        for match in _SENTENCE_END.finditer(block):
            out.append(block[start:match.start()])
            start = match.end()
        out.append(block[start:])
    return [s for s in out if s.strip()]
