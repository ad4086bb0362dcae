"""A page bigger than the window, cut into pieces that fit, and the pieces' notes merged.

Pieces end at paragraph breaks where they can, else at sentence ends, else at a word; every piece
is a verbatim slice of the page, so notes taken from a piece quote the page itself. A page that
would need more than `max_pieces` pieces keeps its head and its tail (the way a long tool result
is cut) and says what it left out. Nothing here calls a model.
"""

from __future__ import annotations

import re
from typing import Iterable

from core.overflow.shrink import trim_at_sentence

MAX_PIECES = 12
_PARAGRAPH = re.compile(r"\n\s*\n")


def split_text(text: str, max_chars: int) -> list[str]:
    """Slices of `text`, each at most `max_chars` long (a single longer word is cut)."""
    if max_chars <= 0:
        raise ValueError("max_chars must be positive")
    pieces: list[str] = []
    rest = text
    while len(rest) > max_chars:
        window = rest[:max_chars + 1]
        breaks = [m.end() for m in _PARAGRAPH.finditer(window) if m.end() <= max_chars]
        cut = breaks[-1] if breaks and breaks[-1] > max_chars // 3 else \
            len(trim_at_sentence(rest, max_chars))
        cut = max(1, min(cut, max_chars))
        piece = rest[:cut]
        if piece.strip():
            pieces.append(piece)
        rest = rest[cut:]
    if rest.strip():
        pieces.append(rest)
    return pieces


def pieces_for(text: str, max_chars: int, max_pieces: int = MAX_PIECES
               ) -> tuple[list[str], int]:
    """The pieces to condense and how many characters in the middle were left out."""
    pieces = split_text(text, max_chars)
    if len(pieces) <= max_pieces:
        return pieces, 0
    head, tail = pieces[:max_pieces - 1], pieces[-1:]
    left_out = sum(len(p) for p in pieces[max_pieces - 1:-1])
    return head + tail, left_out


def merge_notes(notes: Iterable[str]) -> str:
    """The pieces' notes in page order, each line once."""
    seen: set[str] = set()
    lines: list[str] = []
    for note in notes:
        for line in note.splitlines():
            key = " ".join(line.split())
            if key and key not in seen:
                seen.add(key)
                lines.append(line.rstrip())
    return "\n".join(lines)
