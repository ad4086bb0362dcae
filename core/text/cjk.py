"""Chinese, Japanese and Korean text, made searchable by an index that splits words on spaces.

Han, kana and Hangul are written without spaces between words, so a whitespace tokeniser sees a
whole clause as one token (and DuckDB's fts, which keeps only a-z, sees nothing at all). As in
Lucene's CJK analyzer, a run of these characters is indexed as its overlapping character bigrams:
"数据库" -> 数据, 据库, which "嵌入式数据库" also contains. A one-character run stays itself.

What it does not do: segment words, or touch text outside CJK runs (the word index has that).
`RE2_CLASS` is the same set of scripts for SQL regular expressions (DuckDB uses RE2).

`breakable` marks where a line may break in Chinese and Japanese text (a document's line
breaker breaks only at spaces): between any two characters where one is Han, kana or CJK
punctuation, except the usual no-break rules (kinsoku): no line starts with closing punctuation
(，。、；：！？）」』 and the like, small kana, ー), none ends with opening punctuation (（「『),
and a doubled dash or ellipsis (——, ……) stays whole. Korean, written with spaces, keeps
breaking at its spaces.
"""

from __future__ import annotations

import re

# Python's `re` has no \p{Script}: the blocks that hold Hiragana, Katakana, Han and Hangul.
_RANGES = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
           "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f")
RUN = re.compile(f"[{_RANGES}]+")
RE2_CLASS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"


ZWSP = "\u200b"  # a break opportunity of no width (the PDF writer drops it when it draws)
# Characters between which and a neighbour a line may break (UAX #14's ideographs, roughly):
# radicals, CJK punctuation, kana, Han, fullwidth forms.
_BREAKS_AROUND = re.compile("[\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u31f0-\u31ff"
                            "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
                            "\U00020000-\U0002fa1f]")
NO_LINE_START = frozenset(
    "，。、；：！？）」』》〉】〕〗〙〛｝］〞”’・ー々〻ゝゞヽヾ"
    "ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶㇰㇱㇲㇳㇴㇵㇶㇷㇸㇹㇺㇻㇼㇽㇾㇿ"
    "．＇％‰℃°…‥〜～‐゠–!%),.:;?]}")
NO_LINE_END = frozenset("（「『《〈【〔〖〘〚｛［〝“‘＄￥([{")
_WHOLE = frozenset("—…‥")  # a doubled one is one mark


def breakable(text: str, before: str = "") -> str:
    """`text` with ZWSP wherever a line may break between CJK characters (see the module
    docstring); `before`: the character that precedes `text` on the line, if any, so that a
    break may come at the start of `text` too."""
    if not has_cjk(text) and not _BREAKS_AROUND.search(text):
        return text
    out: list[str] = []
    previous = before
    for char in text:
        if previous and _may_break(previous, char):
            out.append(ZWSP)
        out.append(char)
        previous = char
    return "".join(out)


def _may_break(a: str, b: str) -> bool:
    if a.isspace() or b.isspace() or a == ZWSP or b == ZWSP:
        return False  # a space breaks by itself
    if b in NO_LINE_START or a in NO_LINE_END or (a == b and a in _WHOLE):
        return False
    return bool(_BREAKS_AROUND.match(a) or _BREAKS_AROUND.match(b))


def has_cjk(text: str) -> bool:
    return RUN.search(text) is not None


def runs(text: str) -> list[str]:
    """The maximal runs of CJK characters in `text`, in order."""
    return RUN.findall(text)


def bigrams(text: str) -> list[str]:
    """Overlapping character bigrams of every CJK run in `text` (a lone character as itself),
    in order, repeats kept: the terms an index counts."""
    grams: list[str] = []
    for run in RUN.findall(text):
        if len(run) == 1:
            grams.append(run)
        else:
            grams.extend(run[i:i + 2] for i in range(len(run) - 1))
    return grams
