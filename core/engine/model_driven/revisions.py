"""Revisions: a step whose input changed in a few lines is asked about those lines, not redone.

A thinking step runs again whenever anything it read changed (its cache key is what it read,
issue 33), so one edited sentence on a page makes every sub-question that read the page condense
the whole page again, decide its searches on the whole notes again and compress them again: paid
in full to learn about one sentence. Its last answer still holds for everything else it saw.
So the thinking roles keep, per lineage (the engine's model, the role, the sub-question or
topic, and the page or the round), what they were last shown (a hash per line) and what they
answered; when the
step runs again on input that differs in a few lines, the model is shown only those lines with
its earlier answer, and the two are merged in code (core.engine.model_driven.llm_engine):

- condense: the new or edited sentences are judged; the earlier choice among the others
  stands (whether a sentence helps answer the sub-question does not turn on another one);
- decide further searches: the earlier decision is judged again on the lines that changed;
- compress: a claim whose quotes are all still in the notes stands (checked against the page
  again, as every claim is); one quoting a line that left the notes is written again from the
  lines that entered them, or dropped when none did.

When the lines changed in their figures alone (`figures_only`), the steps that judge relevance
or coverage (condense's verdict per sentence, choose, next queries, review) keep their answer
without a call: what a sentence is about does not turn on the value it gives. A figure is a
number standing alone, not one inside a name (HTTP/2), nor one the step's question names.

A first run, a change of more than a quarter of the lines (two at least), a `--refresh` run
(the memo's salt), a memo turned off, or MAX_DEPTH revisions in a row is a full call, whose
answer starts the chain again. The records live in the call memo (kind "revision"), in the store
every worker shares, for as long as it serves LLM answers; a lineage is one fingerprint, so the
newest record replaces the one before. They hold line hashes and the model's answers (masked),
never a page's text.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from core.accounting.memo import CallMemo
from core.llm.base import ChatModel
from core.secrets import mask

MAX_DEPTH = 4  # revisions in a row before a full call starts the chain again
SHARE = 0.25  # at most this share of the lines changed (LEAST at least) is revised
LEAST = 2
_VERSION = 2  # bump when a record's shape changes: older ones are then never read
_WIDTH = 12  # hex digits of a line's hash: 48 bits, no collision within any page


# A figure: a number standing alone (3, 0.5, 1,200, 3.12), not one inside a name (HTTP/2, ext4).
_FIGURE = re.compile(r"(?<![\w/.-])\d+(?:[.,:]\d+)*(?![\w/-])")


def line_hash(text: str) -> str:
    """What a line is known by: its words, whitespace folded."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:_WIDTH]


def figures_named(question: str) -> frozenset[str]:
    """The figures a question names: part of its subject ("What is new in Python 3.12?"), so a
    line whose 3.11 became 3.12 says something else to it, not another value."""
    return frozenset(_FIGURE.findall(question))


def shape_hash(text: str, named: frozenset[str] = frozenset()) -> str:
    """What a line is known by with its figures blanked, those the question names kept: two
    lines of one shape differ only in values."""
    return line_hash(_FIGURE.sub(lambda m: m.group() if m.group() in named else "#", text))


@dataclass(frozen=True)
class Seen:
    """What a step was last shown (one hash per line, in order, and the same with figures
    blanked) and what it answered."""

    lines: tuple[str, ...]
    answer: dict[str, Any]
    depth: int = 0  # revisions since the last full call
    shapes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Delta:
    """How a step's lines changed since it was last asked: positions in the new lines."""

    added: tuple[int, ...]  # lines the step was not shown before (edited ones included)
    gone: tuple[int, ...]  # positions in the old lines that are no longer there
    # an edited line (replaced in place, one for one): new position -> old position
    edited: dict[int, int] = field(default_factory=dict)

    # every change is a line edited in place in its figures alone (see `figures_only`)
    figures_only: bool = False

    @property
    def empty(self) -> bool:
        return not self.added and not self.gone


def delta(before: Seen, lines: Sequence[str],
          named: frozenset[str] = frozenset()) -> Delta | None:
    """The lines that changed from `before` to `lines` (texts), or None when a revision would
    not do: too many changed, or the chain is long enough for a full call. `named`: the
    figures the step's question names (`figures_named`)."""
    now = [line_hash(t) for t in lines]
    if before.depth >= MAX_DEPTH:
        return None
    added: list[int] = []
    gone: list[int] = []
    edited: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, list(before.lines), now, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        added += range(j1, j2)
        gone += range(i1, i2)
        if op == "replace" and i2 - i1 == j2 - j1:
            edited.update(zip(range(j1, j2), range(i1, i2)))
    if max(len(added), len(gone)) > max(LEAST, int(SHARE * len(now))) \
            or len(now) - len(added) < max(len(added), 1):  # most lines must be as they were
        return None
    figures_only = bool(added) and len(edited) == len(added) == len(gone) \
        and len(before.shapes) == len(before.lines) \
        and all(shape_hash(lines[j], named) == before.shapes[i] for j, i in edited.items())
    return Delta(added=tuple(added), gone=tuple(gone), edited=edited,
                 figures_only=figures_only)


class Revisions:
    """What each lineage was last shown and answered, kept in the call memo. Thread safe (the
    memo is)."""

    def __init__(self, memo: CallMemo | None, model: ChatModel) -> None:
        self.memo = memo if memo is not None and memo.enabled else None
        self.provider = model.provider
        self.model = model.model
        # What else shapes the model's answers (as in the call memo's fingerprint): an answer
        # given at another effort or by another server is no base for a revision.
        self.shaping = {name: getattr(model, name, None)
                        for name in ("base_url", "reasoning_effort", "thinking_budget")}

    def last(self, lineage: dict[str, Any]) -> Seen | None:
        if self.memo is None:
            return None
        found = self.memo.answer(self._key(lineage))
        if found is None:
            return None
        try:
            data = json.loads(found)
            joined, sparse = str(data["lines"]), dict(data["shapes"])
            lines = tuple(joined[i:i + _WIDTH] for i in range(0, len(joined), _WIDTH))
            return Seen(lines=lines, answer=dict(data["answer"]), depth=int(data["depth"]),
                        shapes=tuple(sparse.get(str(i), h) for i, h in enumerate(lines)))
        except (ValueError, KeyError, TypeError, AttributeError):  # not what this code wrote
            return None

    def keep(self, lineage: dict[str, Any], lines: Sequence[str], answer: dict[str, Any], *,
             depth: int = 0, named: frozenset[str] = frozenset()) -> None:
        """Record that the step was shown `lines` (texts) and answered `answer`."""
        if self.memo is None:
            return
        # Kept small, as many are kept (one per page a sub-question read): the hashes as one
        # string, and a line's shape only where a figure makes it differ. A median page of the
        # CPython docs (154 lines, 9.3 kB of text) makes a 2.2 kB record; as JSON lists, 6.2 kB.
        hashes = [line_hash(t) for t in lines]
        shapes = {str(i): shape for i, (t, h) in enumerate(zip(lines, hashes))
                  if (shape := shape_hash(t, named)) != h}
        record = json.dumps({"lines": "".join(hashes), "shapes": shapes, "answer": answer,
                             "depth": depth}, ensure_ascii=False)
        self.memo.keep(self._key(lineage), mask(record), kind="revision",
                       provider=self.provider, model=self.model, role=lineage.get("role"))

    def _key(self, lineage: dict[str, Any]):
        assert self.memo is not None
        return self.memo.key("revision", {"v": _VERSION, "provider": self.provider,
                                          "model": self.model, **self.shaping, **lineage})
