"""A stored report read back as a reader would: sections, sentences, the references they cite.

Pure parsing for the quality bench (bench/quality.py): which sentence cites which numbered
reference, with the reference's url and verbatim quote (markdown escapes undone), and the facts
measured without a judge: citations per section, distinct sources, share of cited sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple, Sequence

from core.reports.report import HEADINGS

_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\](?!\()")  # [3] or [3, 4]; not a [text](link)
# A sentence ends at its punctuation plus any citation marks right after it (as
# core/reports/report.py).
_END = re.compile(r"(?:[.!?]+(?=\s|$|\[)|[。！？]+)(?:\s*\[\d+(?:\s*,\s*\d+)*\](?!\())*")
# "1. [Title](url) — “quote”" (older reports) or "1. Title ([host](url)) — “quote”".
_REF = re.compile(r"^\s*(\d+)\.\s+(?:\[.*\]\((?P<old>\S+?)\)|.*?\(\[[^\]]*\]\((?P<url>\S+?)\)\))"
                  r"\s*(?:[—–-]+\s*[“\"](?P<quote>.*)[”\"])?\s*$")
_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # core.text.escaping.markdown_text, undone
# Every language's heading (core.reports.report.HEADINGS), lower-cased, and older spellings.
REFERENCES = {"sources", "参考资料"} | {t["references"].lower() for t in HEADINGS.values()}
DISPUTED = {t["disputed"].lower() for t in HEADINGS.values()}


class Sentence(NamedTuple):
    section: str
    text: str  # as written, citation marks included
    numbers: tuple[int, ...]  # cited reference numbers, in order, once each
    prose: bool  # False for table rows and the Disputed findings list


class ParsedReport(NamedTuple):
    sections: tuple[str, ...]  # content headings: not References nor Disputed findings
    sentences: tuple[Sentence, ...]
    references: dict[int, tuple[str, str]]  # number -> (url, quote)


class CitationPair(NamedTuple):
    sentence: str  # citation marks removed
    number: int
    url: str  # "" when the number is not listed under References
    quote: str


@dataclass(frozen=True)
class MeasuredFacts:
    sections: int
    citations: int  # citation marks in the content sections
    citations_per_section: float | None
    distinct_urls: int  # URLs of the references cited anywhere in the body
    prose_sentences: int
    cited_share: float | None  # prose sentences carrying at least one [n]


def cited_numbers(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(int(n) for g in _CITE.findall(text) for n in g.split(",")))


def split_sentences(text: str) -> list[str]:
    """English and Chinese sentences; a decimal point ("3.14") does not end one."""
    out, start = [], 0
    for match in _END.finditer(text):
        piece = text[start:match.end()].strip()
        if piece and _CITE.fullmatch(piece) and out:  # a lone mark belongs to the one before
            out[-1] += " " + piece
        elif piece:
            out.append(piece)
        start = match.end()
    return out + ([text[start:].strip()] if text[start:].strip() else [])


def _units(lines: Sequence[str]) -> list[tuple[str, bool]]:
    """(text, is_table_row): paragraphs and list items (wrapped lines joined), table rows."""
    units: list[tuple[str, bool]] = []
    para: list[str] = []
    header: list[str] | None = None  # of the table being read
    for line in [ln.strip() for ln in lines] + [""]:
        if para and (not line or line.startswith(("#", ">", "|")) or _ITEM.match(line)):
            units.append((" ".join(para), False))
            para = []
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = cells
                units.append((" | ".join(cells), True))
            elif not re.fullmatch(r"[|:\-\s]+", line):  # not the |---| separator
                # A row is judged with its column names: "asyncio: yields [1]" reads as a claim.
                units.append(("; ".join(f"{h}: {c}" if h else c for h, c in
                                        zip(header + [""] * len(cells), cells)), True))
            continue
        header = None
        if line and not line.startswith(("#", ">")):  # sub-headings and notices are not prose
            para.append(_ITEM.sub("", line))
    return units


def parse_report(markdown: str) -> ParsedReport:
    """Sections are `## ` headings; what precedes the first one (title, topic line) is skipped."""
    blocks: list[tuple[str, list[str]]] = []
    for line in markdown.splitlines():
        if line.startswith("## "):
            blocks.append((line[3:].strip(), []))
        elif blocks:
            blocks[-1][1].append(line)
    sections, sentences, refs = [], [], {}
    for heading, lines in blocks:
        kind = heading.lower().rstrip(":")
        if kind in REFERENCES:
            for m in filter(None, map(_REF.match, lines)):
                refs[int(m[1])] = (m["old"] or m["url"], _ESCAPED.sub(r"\1", m["quote"] or ""))
            continue
        if kind not in DISPUTED:
            sections.append(heading)
        for text, table in _units(lines):
            sentences += [Sentence(heading, piece, cited_numbers(piece),
                                   kind not in DISPUTED and not table)
                          for piece in ([text] if table else split_sentences(text))]
    return ParsedReport(tuple(sections), tuple(sentences), refs)


def citation_pairs(markdown: str) -> list[CitationPair]:
    """One pair per (sentence, cited number); a sentence repeated verbatim is judged once."""
    parsed = parse_report(markdown)
    pairs: dict[tuple[str, int], CitationPair] = {}
    for sentence in parsed.sentences:
        clean = " ".join(re.sub(r"\s*" + _CITE.pattern, "", sentence.text).split())
        for n in sentence.numbers:
            url, quote = parsed.references.get(n, ("", ""))
            pairs.setdefault((clean, n), CitationPair(clean, n, url, quote))
    return list(pairs.values())


def measured_facts(markdown: str) -> MeasuredFacts:
    parsed = parse_report(markdown)
    content = [s for s in parsed.sentences if s.section in parsed.sections]
    marks, n = sum(len(s.numbers) for s in content), len(parsed.sections)
    prose = [s for s in content if s.prose]
    urls = {parsed.references[k][0] for s in parsed.sentences for k in s.numbers
            if k in parsed.references}
    return MeasuredFacts(n, marks, marks / n if n else None, len(urls), len(prose),
                         sum(1 for s in prose if s.numbers) / len(prose) if prose else None)
