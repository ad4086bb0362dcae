"""An untuned real-prose corpus, built offline: installed packages' reStructuredText docstrings
rendered as HTML pages.

SQLAlchemy (a Prefect dependency, so always installed) documents each database dialect in its
module docstring: tens of kilobytes of prose per dialect on locking, transactions, isolation,
JSON, upserts. Nobody tuned the offline engine on it, which is what bench/offline_quality.py
needs. `write_docs_corpus(folder)` cuts each docstring at its top-level sections (one page per
section, titled "<Dialect>: <section>") and renders the few constructs that matter for reading:
section headings, paragraphs, bullet items, literal blocks as <pre>, inline roles as their text.
Directives (`.. seealso::`, `.. versionadded::`) keep their indented body as paragraphs. It is
a reader's rendering, not docutils': nothing here tries to be a complete reStructuredText parser.
"""

from __future__ import annotations

import html
import importlib
import re
from pathlib import Path

MODULES: tuple[tuple[str, str], ...] = (
    ("sqlalchemy.dialects.sqlite.base", "SQLite"),
    ("sqlalchemy.dialects.sqlite.pysqlite", "SQLite pysqlite driver"),
    ("sqlalchemy.dialects.sqlite.aiosqlite", "SQLite aiosqlite driver"),
    ("sqlalchemy.dialects.postgresql.base", "PostgreSQL"),
    ("sqlalchemy.dialects.postgresql.psycopg2", "PostgreSQL psycopg2 driver"),
    ("sqlalchemy.dialects.postgresql.asyncpg", "PostgreSQL asyncpg driver"),
    ("sqlalchemy.dialects.mysql.base", "MySQL"),
    ("sqlalchemy.dialects.oracle.base", "Oracle"),
    ("sqlalchemy.dialects.mssql.base", "SQL Server"),
)
# An underline of one repeated punctuation character at least as long as the title above it.
_UNDERLINE = re.compile(r"^([=\-^~\"'`#*+])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:.-]+:`~?\.?([^`<]*?)\s*(?:<[^`>]*>)?`")  # :class:`text <target>`
_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]+>`_+")  # `text <url>`_
_LITERAL = re.compile(r"``([^`]+)``")
# Directives whose argument is prose ("versionchanged:: 2.0 the dialect now ..."), and how a
# reader's page words them; other directives' arguments are markup and are dropped.
_PROSE_DIRECTIVE = re.compile(r"^\s*\.\. (versionchanged|versionadded|deprecated|note|warning|"
                              r"tip|seealso)::\s*(\d[\w.]*)?\s*(.*)$")
_LEADS = {"versionchanged": "Changed", "versionadded": "New", "deprecated": "Deprecated"}
_EMPHASIS = re.compile(r"\*\*?([^*\s][^*]*?)\*\*?")


def write_docs_corpus(folder: Path, modules: tuple[tuple[str, str], ...] = MODULES) -> list[Path]:
    """Write one HTML page per top-level section of each module's docstring; the pages."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for module, label in modules:
        try:
            doc = importlib.import_module(module).__doc__ or ""
        except ImportError:  # a driver module whose import needs its driver: skip it
            continue
        slug = module.rsplit(".", 2)[-2] + "-" + module.rsplit(".", 1)[-1]
        for n, (title, lines) in enumerate(_sections(doc)):
            path = folder / f"{slug}-{n:02d}.html"
            path.write_text(_page(f"{label}: {title}", lines), encoding="utf-8")
            written.append(path)
    return written


def _sections(doc: str) -> list[tuple[str, list[str]]]:
    """(title, body lines) per top-level section; the top level is the first underline
    character used (SQLAlchemy's dialect docs use "-" for it)."""
    lines = doc.splitlines()
    top = next((m.group(1) for i, line in enumerate(lines[1:], start=1)
                if (m := _UNDERLINE.match(line)) and lines[i - 1].strip()), None)
    sections: list[tuple[str, list[str]]] = [("Overview", [])]
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        m = _UNDERLINE.match(nxt)
        if line.strip() and not line.startswith(" ") and m and len(nxt.strip()) >= len(
                line.strip()) - 1:
            if m.group(1) == top:
                sections.append((line.strip(), []))
            else:
                sections[-1][1].append(f"\x00h3 {line.strip()}")  # a subsection heading
            i += 2
            continue
        sections[-1][1].append(line)
        i += 1
    return [(t, body) for t, body in sections if any(b.strip() for b in body)]


def _page(title: str, lines: list[str]) -> str:
    parts = [f"<h1>{html.escape(title)}</h1>"]
    for kind, text in _blocks(lines):
        if kind == "h3":
            parts.append(f"<h3>{html.escape(_inline(text))}</h3>")
        elif kind == "pre":
            parts.append(f"<pre>{html.escape(text)}</pre>")
        elif kind == "li":
            parts.append(f"<ul><li>{html.escape(_inline(text))}</li></ul>")
        else:
            parts.append(f"<p>{html.escape(_inline(text))}</p>")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title></head>\n<body><article>\n"
            + "\n".join(parts) + "\n</article></body></html>\n")


def _blocks(lines: list[str]) -> list[tuple[str, str]]:
    """Paragraphs, bullet items, literal blocks and subsection headings, in order."""
    out: list[tuple[str, str]] = []
    para: list[str] = []
    literal_next = False
    base = 0  # the indentation of the line that opened a literal block with "::"
    i = 0

    def flush() -> None:
        nonlocal para
        text = " ".join(x.strip() for x in para).strip()
        if text:
            kind = "li" if text.startswith(("* ", "- ")) else "p"
            out.append((kind, text[2:] if kind == "li" else text))
        para = []

    while i < len(lines):
        line = lines[i]
        if line.startswith("\x00h3 "):
            flush()
            out.append(("h3", line[4:]))
        elif not line.strip():
            flush()
        elif literal_next and _indent(line) > base:  # the block indented past its "::" line
            flush()
            block = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
                block.append(lines[i])
                i += 1
            out.append(("pre", "\n".join(block).strip("\n")))
            literal_next = False
            continue
        elif re.match(r"^\s*\.\. ", line):  # a directive or target
            flush()
            literal_next = line.rstrip().endswith("::") and re.match(
                r"^\s*\.\. (?:code-block|sourcecode)", line) is not None
            base = _indent(line)
            if m := _PROSE_DIRECTIVE.match(line):  # its text reads as a paragraph's start
                version = f" in version {m.group(2)}" if m.group(2) else ""
                lead = _LEADS.get(m.group(1), "")
                text = m.group(3).strip()
                para = [f"{lead}{version}" + (f": {text}" if text else ".") if lead else text]
            i += 1
            while i < len(lines) and re.match(r"^\s+:\w[\w-]*:", lines[i]):  # its options
                i += 1
            continue
        else:
            if line.strip().startswith(("* ", "- ")):
                flush()
            para.append(line)
            if line.rstrip().endswith("::"):
                para[-1] = line.rstrip()[:-1]  # "like this::" reads "like this:"
                flush()
                literal_next, base = True, _indent(line)
                i += 1
                continue
        if line.strip():
            literal_next = False
        i += 1
    flush()
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _inline(text: str) -> str:
    text = _LITERAL.sub(lambda m: m.group(1), text)  # first: ``:memory:`` is no role
    text = _ROLE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(lambda m: m.group(1), text)
    return _EMPHASIS.sub(lambda m: m.group(1), text)
