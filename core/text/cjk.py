"""Chinese, Japanese and Korean text, made searchable by an index that splits words on spaces.

Han, kana and Hangul are written without spaces between words, so a whitespace tokeniser sees a
whole clause as one token (and DuckDB's fts, which keeps only a-z, sees nothing at all). As in
Lucene's CJK analyzer, a run of these characters is indexed as its overlapping character bigrams:
"数据库" -> 数据, 据库, which "嵌入式数据库" also contains. A one-character run stays itself.

What it does not do: segment words, or touch text outside CJK runs (the word index has that).
`RE2_CLASS` is the same set of scripts for SQL regular expressions (DuckDB uses RE2).
"""

from __future__ import annotations

import re

# Python's `re` has no \p{Script}: the blocks that hold Hiragana, Katakana, Han and Hangul.
_RANGES = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
           "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f")
RUN = re.compile(f"[{_RANGES}]+")
RE2_CLASS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"


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
