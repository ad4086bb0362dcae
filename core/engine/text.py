"""Plain-text analysis for the offline engine: sentences with exact spans, terms, key phrases.

Sentences are returned as exact substrings of the text they came from, so a quote taken from
here always appears verbatim in the source. Scoring is a small BM25-like overlap; no model, no
weights, fully deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers him his how i if in into is it its itself just me more most my
no nor not of off on once only or other our out over own same she should so some such than that
the their them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours use used using via vs
versus compare comparison comparing difference differences different between python pythons
which best should recommend recommended better choose choosing option options work works way ways
""".split())

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#.-]*[A-Za-z0-9_+#]|[A-Za-z]|[\u4e00-\u9fff]")
_HEADING = re.compile(r"^\s*(?:#+\s.*|[A-Z][A-Z0-9 _-]{2,}|[-=*]{3,}|\S+ - .*)\s*$")
# Chinese puts no space after 。！？, so there a sentence ends at the mark itself.
_SENT_END = re.compile(r"(?<=[。！？])\s*|(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`\u4e00-\u9fff])|\n\s*\n")
_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Sentence:
    text: str  # exact substring of the source text
    start: int
    end: int

    @property
    def clean(self) -> str:
        return " ".join(self.text.split())


def terms(text: str) -> list[str]:
    """Lower-cased content words (stop words removed, light plural stemming)."""
    out = []
    for w in _WORD.findall(text.lower()):
        w = w.strip(".-")
        if len(w) < 2 and not ("\u4e00" <= w <= "\u9fff"):
            continue
        if w in STOPWORDS:
            continue
        out.append(stem(w))
    return out


def query_words(text: str) -> list[str]:
    """Content words as written, for queries: search backends stem for themselves and our light
    stem is not theirs ("databases" -> "databas", which porter then makes "databa")."""
    words = [w.strip("?.,!:;\"'()").lower() for w in text.split() if terms(w)]
    return list(dict.fromkeys(words))


def stem(word: str) -> str:
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4 and not word.endswith("ss"):
            if suffix == "es":
                return word[:-2]
            word = word[: -len(suffix)] + keep
            break
    # "schedules" lost "es" above; drop the singular's final e so "schedule" meets it.
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def sentences(text: str, *, min_chars: int = 40, max_chars: int = 600) -> list[Sentence]:
    """Prose sentences of `text` as exact spans; code lines, headings and fragments are skipped."""
    out: list[Sentence] = []
    pos = 0
    for m in list(_SENT_END.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        raw = text[pos:end]
        lead = len(raw) - len(raw.lstrip())
        # Drop heading lines glued to the sentence (pydoc's NAME, DESCRIPTION, markdown #).
        while True:
            first, nl, rest = raw[lead:].partition("\n")
            if nl and (_HEADING.match(first) or _is_title(first, rest)):
                lead += len(first) + 1
                lead += len(rest) - len(rest.lstrip())
                continue
            break
        span = raw[lead:].rstrip()
        start = pos + lead
        pos = m.end() if m else len(text)
        if _is_prose(span, min_chars, max_chars):
            out.append(Sentence(span, start, start + len(span)))
    return out


_UNIT_END = re.compile(r"(?<=[。！？])\s*|(?<=[.!?])\s+|\n")


def units(text: str, *, min_chars: int = 12, max_chars: int = 1_200) -> list[Sentence]:
    """Every sentence or line of `text` (table rows, list items and short facts included) as
    exact spans: what a model picks evidence from by number. Blank and tiny pieces are
    skipped; a longer piece is cut at its last space before `max_chars`."""
    out: list[Sentence] = []
    pos = 0
    for m in list(_UNIT_END.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        raw = text[pos:end]
        start = pos + len(raw) - len(raw.lstrip())
        span = raw.strip()
        pos = m.end() if m else len(text)
        while span:
            piece = span if len(span) <= max_chars else span[:span.rfind(" ", 0, max_chars) + 1
                                                              or max_chars]
            kept = piece.rstrip()
            cjk = len(_CJK.findall(kept))
            if len(kept) + cjk >= min_chars and any(ch.isalnum() for ch in kept):
                out.append(Sentence(kept, start, start + len(kept)))
            rest = span[len(piece):]
            start += len(piece) + len(rest) - len(rest.lstrip())
            span = rest.lstrip()
    return out


def _is_title(line: str, after: str) -> bool:
    """A short unpunctuated line before a capitalised one: a title (an HTML <h1> after
    extraction, a plain-text heading), not the first line of a wrapped sentence."""
    return (0 < len(line.split()) <= 5 and not re.search(r"[.!?,;:。！？，；：]\s*$", line)
            and after.lstrip()[:1].isupper())


def _is_prose(span: str, min_chars: int, max_chars: int) -> bool:
    # A CJK character carries about a word: count it double for length, as one word for words.
    cjk = len(_CJK.findall(span))
    if not (min_chars <= len(span) + cjk and len(span) <= max_chars):
        return False
    if span[-1] not in ".!?。！？":
        return False
    letters = sum(ch.isalpha() for ch in span)
    if letters < 0.6 * len(span.replace(" ", "").replace("\n", "")):
        return False  # code, tables, signatures
    if any(tok in span for tok in (">>>", "...:", "def ", "):\n", "|", "═", "──")):
        return False
    if re.match(r"^(?:#|[\w.]+ [-—] |[\w.]+\(.*?\)\s)", span):
        return False  # a heading, pydoc's "module - summary" line, a "func(args) Doc" line
    first_line = span.splitlines()[0]
    return len(span.split()) + cjk >= 6 and not first_line.rstrip().endswith((":", "："))


class Scorer:
    """BM25-style relevance of sentences to a query, over one pool of sentences."""

    def __init__(self, pool: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(terms(s)) for s in pool]
        self.avg = sum(sum(d.values()) for d in self.docs) / max(len(self.docs), 1) or 1.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def score(self, i: int, query_terms: Iterable[str]) -> float:
        doc = self.docs[i]
        length = sum(doc.values()) or 1
        total = 0.0
        for t in set(query_terms):
            f = doc.get(t, 0)
            if f:
                total += self.idf.get(t, 0.0) * f * (self.k1 + 1) / (
                    f + self.k1 * (1 - self.b + self.b * length / self.avg))
        return total


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of content terms: used to drop near-duplicate sentences."""
    ta, tb = set(terms(a)), set(terms(b))
    return len(ta & tb) / max(len(ta | tb), 1)
