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

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_+#.-]*[A-Za-z0-9_+#]|[A-Za-z]|[\u4e00-\u9fff]+")
# A "name — summary" line with no full stop is a heading or a link to the next page (pydoc's
# "os - Miscellaneous...", Sphinx's "sys — System-specific parameters and functions").
_HEADING = re.compile(r"^\s*(?:#+\s.*|[A-Z][A-Z0-9 _-]{2,}|[-=*]{3,}|\S+ - .*"
                      r"|\S+ [–—] .*[^.!?。])\s*$")
# Chinese puts no space after 。！？；, so there a sentence ends at the mark itself (or at the
# closing quote right after it: 他说：“好。”); a half-width !?; ends one only after a Han character.
_CLOSE = "”’」』）)"
_SENT_END = re.compile(rf"(?<=[。！？；．｡])(?![{_CLOSE}])\s*|(?<=[。！？；．｡][{_CLOSE}])\s*"
                       r"|(?<=[\u4e00-\u9fff][!?;])\s*"
                       r"|(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`\u4e00-\u9fff])|\n\s*\n")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_TERMINAL = ".!?。！？；．｡"
# A "see also" link's caption: a title, a dash, where to read it.
_LINK_LINE = re.compile(r"^[^\n.]{3,80}? [-–—] (?:in the |see |documentation\b)")
# A parameter's entry in an API reference: an identifier, a colon, a capitalised description.
_PARAMETER = re.compile(r"(?:^|[.;]\s+)[a-z_][a-z0-9_]*: [A-Z]")
# Words a sentence often opens with, and a wrapped line seldom continues with, capitalised.
_OPENERS = frozenset("The A An This These That Those It Its In If When While For To By On "
                     "Each Every Some Most Many All Use Set Return Returns As Although Unlike "
                     "Since Because There However Note".split())
# Words a wrapped line can stop on mid-sentence and a heading seldom ends with.
_CONTINUES = frozenset("""
a an the of to in on at by for from with without into onto over under and or nor but as than
that which who whose whom is are was were be been being has have had do does did can could will
would shall should may might must not no its their his her our your my this these those such via
per vs versus between about across after before during like so if when while where whether
because although though since until unless both either neither each every some any all more
most less very also just only even then thus
""".split())
# A labelled heading: "PostgreSQL asyncpg driver: Disabling the PostgreSQL JIT ...".
_LABELLED = re.compile(r"\w: [A-Z]")
# Function characters that glue Chinese words together: a run is cut at them, so "电池的容量"
# gives the bigrams of 电池 and 容量, not the meaningless 池的 and 的容.
_CJK_GLUE = re.compile(r"[的了和与及或是在有也都而就被把对之其这那些吗呢吧啊着过]+")
# Bigrams of question and template wording that say nothing about the subject (cf. STOPWORDS).
_CJK_STOP = frozenset("""
哪 么 什么 哪些 有哪 哪个 如何 怎么 怎样 为什 为何 主要 一个 一些 我们 你们 他们 可以 进行 以及 还是
应该 应选 选择 比较 对比 区别 不同 建议 推荐 给出 理由 优缺 缺点 优点 相比 方面 情况
""".split())
_CJK_CUT = re.compile(_CJK_GLUE.pattern + "|" + "|".join(sorted(_CJK_STOP, key=len, reverse=True)))
# A Han character carries about a word: Chinese prose needs far fewer characters for a sentence.
MIN_CJK_CHARS = 10


@dataclass(frozen=True)
class Sentence:
    text: str  # exact substring of the source text
    start: int
    end: int

    @property
    def clean(self) -> str:
        """One line: a list's items after its lead-in joined with semicolons."""
        lead, newline, items = self.text.partition("\n")
        if newline and _introduces_list(lead, items):
            lines = [" ".join(i.split()) for i in items.splitlines() if i.strip()]
            listed = " ".join(line if _joined_as_is(line, lines[n + 1:n + 2]) else f"{line};"
                              for n, line in enumerate(lines))
            return f"{' '.join(lead.split())} {listed}"
        return " ".join(self.text.split())


def _joined_as_is(line: str, after: list[str]) -> bool:
    """Whether a list's line joins the next without a semicolon: it is the last, it ends in its
    own punctuation ("... DESCRIPTOR identifier;"), or it wraps a sentence the next line ends
    ("... any existing text search" / "configurations that use the parser.")."""
    if not after or line.endswith((";", "；", ".", "。", ",", "，")):
        return True
    nxt = after[0]
    return nxt[:1].islower() and nxt.endswith(tuple(_TERMINAL))


def terms(text: str) -> list[str]:
    """Lower-cased content words (stop words removed, light plural stemming); a run of Han
    characters gives its character bigrams (Chinese has no spaces, and a bigram is the usual
    unit of meaning: 电池, 容量, 衰减), a lone character itself."""
    out = []
    for w in _WORD.findall(text.lower()):
        if _CJK.match(w):
            out.extend(_han_terms(w))
            continue
        w = w.strip(".-")
        if len(w) < 2 or w in STOPWORDS:
            continue
        out.append(stem(w))
    return out


def _han_terms(run: str) -> list[str]:
    # Cut at function characters and at question wording too: "主要机制有哪些" is 机制 alone,
    # not 机制 plus the stray 要机 that 主要 leaves behind.
    out = []
    for part in _CJK_CUT.split(run):
        if len(part) == 1:
            out.extend([part] if part not in _CJK_STOP else [])
        else:
            out.extend(part[i:i + 2] for i in range(len(part) - 1))
    return out


def is_cjk_text(text: str) -> bool:
    """Mostly Han characters: judged by length in characters, not words."""
    han = len(_CJK.findall(text))
    return han > 0 and han >= 0.5 * len(text.replace(" ", ""))


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


_CONTENTS_ENTRY = re.compile(r"\s[-–]\s*[A-Z]?\d+(?:\.\d+)*\.?$|^[-–]\s+[A-Z]?\d+(?:\.\d+)+\.?\s")
_ROW = re.compile(r"^\s*\||\|\s*$")  # a table row, or a row's end, as the extractor writes it
_CELLS = re.compile(r"(?:\|[ \t]*)+")  # the empty cells before a cell's text


def sentences(text: str, *, min_chars: int = 40, max_chars: int = 600) -> list[Sentence]:
    """Prose sentences of `text` as exact spans; code lines, headings and fragments are skipped."""
    out: list[Sentence] = []
    pos = 0
    for m in list(_SENT_END.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        raw = text[pos:end]
        lead = len(raw) - len(raw.lstrip())
        # Drop heading lines glued to the sentence (pydoc's NAME, DESCRIPTION, markdown #).
        # And tables: a sentence after a table (its caption and rows), or inside an admonition
        # that the extractor wrote as one ("|  | 注意 |"), starts after them and empty cells.
        while True:
            first, nl, rest = raw[lead:].partition("\n")
            caption = _ROW.match(rest.lstrip().partition("\n")[0])  # a table's title line
            if nl and (_HEADING.match(first) or _is_title(first, rest) or _ROW.match(first)
                       or caption):
                lead += len(first) + 1
                lead += len(rest) - len(rest.lstrip())
                continue
            break
        cells = _CELLS.match(raw, lead)
        lead = cells.end() if cells else lead
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
    extraction, a plain-text heading), not the first line of a wrapped sentence. A longer line
    is a title when most of its words are capitalised ("SQLite driver: Serializable isolation /
    Savepoints"), or is short or labelled ("driver: Disabling the JIT") and does not stop on a
    word a sentence goes on after ("with", "the"); a mostly-Han line (Chinese has no capitals)
    when it is short."""
    if re.search(r"[.!?,;:。！？，；：、]\s*$", line):
        return False
    head = after.lstrip()[:1]
    if not (head.isupper() or _CJK.match(head)):
        return False
    if is_cjk_text(line):
        return 0 < len(line.strip()) <= 30
    words = [w for w in line.split() if w[:1].isalpha()]
    capitalised = sum(w[:1].isupper() for w in words)
    # A wrapped sentence does not go on with a capitalised "The" or "If": a new sentence does.
    opener = after.split(None, 1)[0] in _OPENERS if after.split() else False
    # A short or labelled line before a capital is a heading unless it stops where a sentence
    # goes on ("... handed over for\nPostgreSQL"): "Franz Kafka's letters and their delivery".
    last = line.split()[-1].lower().strip("\"'()[]") if line.split() else ""
    ends = last not in _CONTINUES and not line.rstrip().endswith("-")
    return 0 < len(line.split()) <= 5 or (0 < len(words) <= 15 and (
        capitalised * 2 >= len(words) or opener)) or (ends and (
            0 < len(words) <= 8 or bool(_LABELLED.search(line))))


def _is_prose(span: str, min_chars: int, max_chars: int) -> bool:
    # A CJK character carries about a word: count it as one word, and hold a Chinese span to
    # MIN_CJK_CHARS characters ("高温会加速电解液分解！" is a sentence at 11).
    cjk = len(_CJK.findall(span))
    # Chinese with Latin terms in it ("WAL 是预写日志（write-ahead log）的缩写。") is Chinese too.
    chinese = cjk >= 5 or is_cjk_text(span)
    size = len(span) if chinese else len(span) + cjk
    least = min(min_chars, MIN_CJK_CHARS) if chinese else min_chars
    if not (least <= size and len(span) <= max_chars):
        return False
    first_line, _, rest = span.partition("\n")
    listed = _introduces_list(first_line, rest)
    end = span[-2] if len(span) > 1 and span[-1] in _CLOSE else span[-1]
    if end not in _TERMINAL and not (end == ";" and is_cjk_text(span)) and not listed:
        return False
    letters = sum(ch.isalpha() for ch in span)
    if letters < 0.6 * len(span.replace(" ", "").replace("\n", "")):
        return False  # code, tables, signatures
    if any(tok in span for tok in (">>>", "...:", "def ", "):\n", "|", "═", "──")):
        return False
    if re.match(r"^(?:#|[\w.]+ [-—] |[\w.]+\(.*?\)\s)", span):
        return False  # a heading, pydoc's "module - summary" line, a "func(args) Doc" line
    if _LINK_LINE.match(span) or _CONTENTS_ENTRY.search(span):
        return False  # a reference link's caption ("Table options - in the PostgreSQL docs."),
        # or a table of contents' entry ("高级软件包管理操作 - 2.14.", "- 12.5. 在条件表达式中…")
    if _PARAMETER.search(span):
        return False  # a run of parameter docs ("workers. mp_context: A context to launch ...")
    if listed:  # the lead-in says it: "... you can extend SQL by adding:" and its items
        return len(first_line.split()) + len(_CJK.findall(first_line)) >= 6
    return len(span.split()) + cjk >= 6 and not first_line.rstrip().endswith((":", "："))


_LIST_ITEMS = 2, 12  # how many lines a lead-in's list may have, to be quoted with it
_LIST_ITEM_CHARS = 160


def _introduces_list(first_line: str, rest: str) -> bool:
    """A lead-in ending in a colon followed by short lines, its list ("...by adding:\nfunctions
    (starting in Section 38.3)\naggregates ..."): the list is what the lead-in says, so the two
    are one quote, where a lead-in alone says nothing."""
    if not first_line.rstrip().endswith((":", "：")):
        return False
    items = [line.strip() for line in rest.splitlines() if line.strip()]
    return (_LIST_ITEMS[0] <= len(items) <= _LIST_ITEMS[1]
            and all(len(i) <= _LIST_ITEM_CHARS and any(ch.isalpha() for ch in i) for i in items))


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
