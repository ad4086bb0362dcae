"""Quotes checked against the pages they claim to come from, and stored as the page's own text.

A model retyping a sentence "corrects" quotes and typography; `verified_claim` keeps only the
evidence whose quote is found in a page that was read (up to whitespace and typographic
variants), stores the exact substring of that page, and drops the rest. A claim without verified
quotes cannot keep "high" confidence. Nothing here calls a model.
"""

from __future__ import annotations

import re
from typing import Sequence

from core.engine.model_driven.schemas import EvidenceOut
from core.models import Claim, Evidence, Source

_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…|\[\.\.\.\])\s*")
# Typographic variants a model "corrects" while copying; each maps to one character, so
# positions in the normalised text map straight back to the page.
_CHAR_FOLD = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "–": "-",
                            "—": "-", "\u00a0": " "})


def _normalised(text: str) -> tuple[str, list[int]]:
    """`text` with whitespace runs collapsed and typography folded, and each char's origin."""
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text.translate(_CHAR_FOLD)):
        if ch.isspace():
            if not chars or chars[-1] == " ":
                continue
            ch = " "
        chars.append(ch)
        origin.append(i)
    return "".join(chars), origin


def _anchor(quote: str, source_text: str) -> str | None:
    """The exact substring of `source_text` that `quote` matches up to whitespace, or None."""
    needle = " ".join(quote.translate(_CHAR_FOLD).split())
    if not needle:
        return None
    hay, origin = _normalised(source_text)
    at = hay.find(needle)
    if at < 0:
        return None
    return source_text[origin[at]:origin[at + len(needle) - 1] + 1]


def _url_key(url: str) -> str:
    url = url.strip().split("#")[0].rstrip("/").lower()
    return url.replace("http://", "https://", 1)


def _verify(ev: EvidenceOut, sources: Sequence[Source]) -> list[Evidence]:
    """The quote anchored in its page; else in any page read (the model mixed up URLs).

    A quote stitched with an ellipsis is checked fragment by fragment.
    """
    named = [s for s in sources if _url_key(s.url) == _url_key(ev.url)]
    others = [s for s in sources if s not in named]
    found: list[Evidence] = []
    for fragment in filter(None, (f.strip() for f in _ELLIPSIS.split(ev.quote))):
        for source in (*named, *others):
            exact = _anchor(fragment, source.text)
            if exact:
                found.append(Evidence(url=source.url, title=source.title, quote=exact,
                                      section=source.section_at(source.text.find(exact))))
                break
    return found


def verified_claim(text: str, evidence: Sequence[EvidenceOut], confidence: str,
                    sources: Sequence[Source]) -> Claim:
    kept: dict[tuple[str, str], Evidence] = {}
    for ev in evidence:
        for found in _verify(ev, sources):
            kept.setdefault((found.url, found.quote), found)
    # "high" means several pages agree; without verified quotes the claim cannot keep it.
    if not kept and confidence == "high":
        confidence = "medium"
    return Claim(text=text.strip(), evidence=tuple(kept.values()), confidence=confidence)
