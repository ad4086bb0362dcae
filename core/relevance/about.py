"""Whether a text is about a subject: it names it, or it sits in a page or section whose title
names it. Nothing else decides relevance here; meaning and word overlap rank what is about the
subject (core.engine.offline.selection), they never let in what is not.

    naming(phrases, terms)              how fully a text's terms name one of the phrases (1.0: all)
    names(text, keys)                   the text names one of the key phrases
    about(text, title, section, keys)   the text, its page's title or its section names one
    said(text)                          the text without its cross-references

A cross-reference ("参见 第 2.1.4 节 “Debian 档案库基础”", "see Section 19.9, “Secure TCP/IP
Connections with SSL”") points at where a subject is treated; it does not name the subject in
what the sentence says, so it is left out before naming is judged.

A key phrase is named when every word of it is (a word by its stem, and a word of five letters
or more also by a longer word it begins: "cancel" is named by "cancellation"); a long Chinese
phrase when two thirds of its bigrams are (bigrams across word boundaries are noise).
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Sequence

from core.engine.sentences import terms

_HAN = re.compile(r"[\u4e00-\u9fff]")
LONG_PHRASE = 2 / 3  # share of a long Chinese phrase's bigrams a text must name
# A numbered section, chapter or table and its quoted title; a title may quote a name in turn
# (“档案库层的“Release”文件”).
_QUOTED = r"(?:“(?:[^“”]|“[^“”]*”){1,120}”|\"[^\"]{1,120}\"|「[^」]{1,120}」)"
_CROSS_REFERENCE = re.compile(
    r"第\s*[\d.]+\s*[章节表]\s*" + _QUOTED
    + r"|\b(?:Section|Chapter|Appendix|Table|Part)\s+[\dA-Z][\d.]*,?\s*" + _QUOTED)


def said(text: str) -> str:
    """`text` with its cross-references to numbered sections blanked out (see above)."""
    return _CROSS_REFERENCE.sub(" ", text)


def naming(phrases: Sequence[Sequence[str]], have: Iterable[str]) -> float:
    """1.0 when `have` (terms of a text) names some phrase (each a list of terms): every word of
    it, or two thirds of the bigrams of a longer Chinese one; else the best fraction named,
    scaled so that 1.0 is the bar."""
    stems: dict[str, list[str]] = {}
    for t in set(have):
        stems.setdefault(t[:5], []).append(t)
    best = 0.0
    for phrase in phrases:
        words = set(phrase)
        if not words:
            continue
        bar = LONG_PHRASE if len(words) > 2 and any(_HAN.match(t) for t in words) else 1.0
        named = sum(any(agree(t, h) for h in stems.get(t[:5], ())) for t in words)
        best = max(best, min(1.0, named / len(words) / bar))
    return best


_ENDING = 5  # letters past a shared stem that still make the same word ("-ation", "-ing")
_SUFFIX = re.compile(r"(?:ing|ed|ions?|ers?|es|ments?|ly)$")


def _root(word: str) -> str:
    """A word without its inflection, kept to four letters or more: extending -> extend."""
    cut = _SUFFIX.sub("", word)
    return cut if len(cut) >= 4 and "_" not in word else word


def agree(a: str, b: str) -> bool:
    """The same word for naming's sake: equal, or equal without their inflection ("extending"
    and "extended"); one (of five letters or more) a prefix of the other: "cancel" and
    "cancellation", "schedul" (stemmed "schedule") and "scheduling"; or the two sharing their
    first seven letters and differing after them in an ending alone: "collector" and
    "collection", "replicate" and "replication". But "multipl" (stemmed "multiples") is not
    "multiprocessing", nor "extensibility" "extension"."""
    if a == b or _root(a) == _root(b):
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 5 and long_.startswith(short):
        # An identifier that merely starts with the word is another name: sched_param, md5sum.
        return not long_[len(short):][:1] in "_0123456789"
    if len(short) < 7 or short[:7] != long_[:7] or "_" in short + long_:
        return False
    # ...and differing only in an ending: "extensibility" is not "extension".
    stem = len(os.path.commonprefix([a, b]))
    return max(len(a), len(b)) - stem <= _ENDING


def split_terms(text: str) -> list[str]:
    """A text's terms with dotted and hyphenated names taken apart ("os.path" is os and path,
    "write-ahead" write and ahead); an identifier with underscores stays whole (pg_dump)."""
    return terms(re.sub(r"[-./]", " ", text))


def key_terms(keys: Sequence[str]) -> list[list[str]]:
    """The key phrases as lists of terms."""
    return [t for t in (split_terms(k) for k in keys) if t]


def names(text: str, keys: Sequence[str]) -> bool:
    """Whether `text` names one of the key phrases."""
    phrases = key_terms(keys)
    return bool(phrases) and naming(phrases, split_terms(text)) >= 1.0


# A book's label before a title ("Chapter 38.", "Part II.", "Appendix F.", "第5章") is where
# the page sits, not what it is about.
BOOK_PARTS = r"(?:chapter|part|appendix|section|book|volume|lesson)"
CJK_BOOK_LABEL = r"第[\d一二三四五六七八九十百]+[章节部篇]"
_LABEL = re.compile(rf"^\s*(?:{BOOK_PARTS}\s+[\w.]+\.?|{CJK_BOOK_LABEL})\s*", re.I)


def own_page(title: str, keys: Sequence[str]) -> float:
    """How much a page is the subject's own: 1.0 when its title opens with a key ("subprocess —
    Subprocesses with..." for subprocess; "Chapter 38. Extending SQL" for Extending), 0.5 when
    it names one elsewhere ("asyncio.subprocess"), else 0."""
    words = split_terms(_LABEL.sub("", title))
    phrases = key_terms(keys)
    if any(words[:len(p)] == p for p in phrases):
        return 1.0
    return 0.5 if phrases and naming(phrases, words) >= 1.0 else 0.0


def about(text: str, title: str, section: str, keys: Sequence[str]) -> bool:
    """Whether a quote is about the subject `keys`: it names one (not in a cross-reference), or
    its page's title or the headings it sits under do. With no keys (a topic without a content word) everything is."""
    if not key_terms(keys):
        return True
    return names(said(text), keys) or names(title, keys) or names(section, keys)
