"""Revised calls: condense, next queries and compress asked about what changed; choose and review
kept when only figures did.

Each method here answers its role from the step's last answer and a call about the lines that
changed since (core.engine.model_driven.revisions says when, and why that is sound), or returns
None, and the role makes its full call (core.engine.model_driven.llm_engine). A revision the
model cannot give (invalid twice) is None as well: the full call decides, never a guess.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

from pydantic import BaseModel

from core.engine.model_driven import prompts
from core.engine.model_driven.calls import INVALID_OUTPUT, ModelCalls
from core.engine.model_driven.quotes import verified_claim
from core.engine.model_driven.revisions import (Delta, Revisions, Seen, delta, figures_named,
                                                line_hash)
from core.engine.model_driven.schemas import CompressOut, CondenseOut, ControllerOut, EvidenceOut
from core.llm.base import ChatModel
from core.models import Claim, Message, Source, SubQuestion, Transcript
from core.signals import Fatal

log = logging.getLogger("researchflow.engine")
Out = TypeVar("Out", bound=BaseModel)

_SOURCE = re.compile(r"Source: (.*) <([^<>]*)>$")


@dataclass(frozen=True)
class NoteLine:
    """One line of a researcher's notes and the page it is under."""

    text: str
    url: str = ""
    title: str = ""

    @property
    def quotable(self) -> bool:
        """A sentence of a page, not the page's header or the model's note on it."""
        return bool(self.url) and not _SOURCE.match(self.text) \
            and not (self.text.startswith("(") and self.text.endswith(")"))


def note_lines(transcript: Transcript) -> list[NoteLine]:
    """The notes' lines (tool results other than search listings, oldest first), each with the
    page it is under: what the decision and the compressing read."""
    out: list[NoteLine] = []
    for m in transcript.messages:
        if m.role != "tool" or m.name == "search" or not m.content.strip():
            continue
        url = title = ""
        for line in m.content.strip().splitlines():
            if not line.strip():
                continue
            header = _SOURCE.match(line.strip())
            if header:
                title, url = header.group(1), header.group(2)
            out.append(NoteLine(line.strip(), url, title))
    return out


class RevisingCalls(ModelCalls):
    """`ModelCalls` that remember, per lineage, what a role was shown and answered."""

    def __init__(self, model: ChatModel, *, revisions: Revisions | None = None,
                 **options: Any) -> None:
        super().__init__(model, **options)
        self.revisions = revisions

    def _lineage(self, role: str, question: str, language: str,
                 **more: Any) -> dict[str, Any]:
        # The role's instructions are part of it: a changed prompt starts every chain again.
        return {"role": role, "question": question, "language": language,
                "prompt": _PROMPTS[role], **more}

    def _keep(self, lineage: dict[str, Any], lines: Sequence[str], answer: dict[str, Any],
              depth: int = 0) -> None:
        if self.revisions is None:
            return
        for known in _known_as(lineage, lines):
            self.revisions.keep(known, lines, answer, depth=depth,
                                named=figures_named(lineage["question"]))

    def _last(self, lineage: dict[str, Any],
              lines: Sequence[str]) -> tuple[Seen | None, Delta | None]:
        if self.revisions is None:
            return None, None
        before = next((found for found in map(self.revisions.last, _known_as(lineage, lines))
                       if found is not None), None)
        if before is None:
            return None, None
        change = delta(before, lines, figures_named(lineage["question"]))
        if change is not None and change.empty:
            # The same lines again (a retry, a piece of a page asked again, a step whose page
            # changed where it does not look): its answer to them, served like a memo's repeat.
            serve = getattr(self.model, "serve_repeat", None)
            if callable(serve):
                serve()
        return before, change

    def _carried(self, lineage: dict[str, Any], lines: Sequence[str], before: Seen | None,
                 change: Delta | None) -> dict[str, Any] | None:
        """The earlier answer of a step that judges relevance or coverage (which sentences,
        which searches, which follow-ups), when its lines changed in their figures alone: what
        a line is about does not turn on the value it gives. The values themselves reach the
        findings, which are asked again, and the report. None: ask."""
        if before is None or change is None or not (change.empty or change.figures_only):
            return None
        if not change.empty:
            self._keep(lineage, lines, before.answer, before.depth + 1)
            log.info("%s: only figures changed in its lines; the earlier answer stands",
                     lineage["role"])
        return before.answer

    def _ask_unless_carried(self, lineage: dict[str, Any], messages: list[Message],
                            shape: type[Out], *, what: str, tokens: int) -> Out:
        """A relevance or coverage answer (choose, review): the earlier one when only figures
        changed in what the last message shows (`_carried`), else asked in full and kept."""
        lines = [line for line in messages[-1].content.splitlines() if line.strip()]
        carried = self._carried(lineage, lines, *self._last(lineage, lines))
        if carried is not None:
            return shape.model_validate(carried)
        out, _ = self._ask(messages, shape, what=what, max_tokens=tokens)
        self._keep(lineage, lines, out.model_dump())
        return out

    def _revise(self, messages: list[Message], shape: type[Out], what: str,
                tokens: int) -> Out | None:
        try:
            return self._ask(messages, shape, what=what, max_tokens=tokens)[0]
        except Fatal as exc:
            if exc.reason != INVALID_OUTPUT:
                raise
            log.info("%s: no valid revision, asking in full", what)
            return None

    # -- condense -----------------------------------------------------------------------------
    def _revised_ids(self, lineage: dict[str, Any], subquestion: SubQuestion, source: Source,
                     shown: Sequence[int], lines: Sequence[str],
                     tokens: int) -> tuple[list[int], str] | None:
        """The page's sentence numbers to keep, and the note: the earlier choice among the
        sentences that did not change, and the model's among those that did."""
        before, change = self._last(lineage, lines)
        if before is None or change is None:
            return None
        chosen = set(before.answer.get("chosen", ()))
        added = set(change.added)
        kept = [shown[j] for j, text in enumerate(lines)
                if j not in added and line_hash(text) in chosen]
        picks: list[int] = []
        if change.figures_only:  # an edited figure: each sentence keeps its verdict
            picks = [shown[j] for j, i in change.edited.items() if before.lines[i] in chosen]
        elif change.added:
            was = {j: before.lines[i] in chosen for j, i in change.edited.items()}
            numbered = "\n".join(f"[{shown[j]}] {lines[j]}" for j in change.added)
            user = prompts.condense_revise_user(
                subquestion.question, source.title, [shown[j] for j, c in was.items() if c],
                [shown[j] for j, c in was.items() if not c], numbered)
            out = self._revise([self._system(prompts.CONDENSE_REVISE_SYSTEM,
                                             subquestion.language),
                                Message(role="user", content=user)], CondenseOut,
                               f"revised notes on {source.url}", tokens)
            if out is None:
                return None
            offered = {shown[j] for j in change.added}
            picks = [n for n in out.ids if n in offered]
        ids = sorted(set(kept) | set(picks))
        note = str(before.answer.get("note", ""))
        if change.empty:
            return ids, note
        numbers = {n: lines[j] for j, n in enumerate(shown)}
        self._keep(lineage, lines, {"chosen": [line_hash(numbers[n]) for n in ids],
                                    "note": note}, before.depth + 1)
        log.info("condensed %s again from %d changed sentence(s) of %d", source.url,
                 len(change.added), len(lines))
        return ids, note

    # -- decide further searches --------------------------------------------------------------
    def _revised_decision(self, lineage: dict[str, Any], transcript: Transcript,
                          round_index: int, lines: Sequence[str],
                          tokens: int) -> ControllerOut | None:
        before, change = self._last(lineage, lines)
        carried = self._carried(lineage, lines, before, change)
        if carried is not None:
            return ControllerOut.model_validate(carried)
        if before is None or change is None:
            return None
        sq = transcript.subquestion
        user = prompts.controller_revise_user(
            sq.question, round_index, transcript.queries_run,
            json.dumps(before.answer, ensure_ascii=False), [lines[j] for j in change.added],
            len(change.gone))
        out = self._revise([self._system(prompts.CONTROLLER_REVISE_SYSTEM, sq.language),
                            Message(role="user", content=user)], ControllerOut,
                           "revised decision on further searches", tokens)
        if out is not None:
            self._keep(lineage, lines, out.model_dump(), before.depth + 1)
        return out

    # -- compress -----------------------------------------------------------------------------
    def _revised_claims(self, lineage: dict[str, Any], transcript: Transcript,
                        notes: Sequence[NoteLine], tokens: int) -> list[Claim] | None:
        """The earlier claims whose quotes are all still in the notes, with claims written from
        the lines that entered them in place of those whose quotes left."""
        lines = [n.text for n in notes]
        before, change = self._last(lineage, lines)
        if before is None or change is None:
            return None
        sources = transcript.sources
        text = " ".join(" ".join(lines).split())
        slots: list[Claim | None] = []  # the earlier claims in order; None: one gone stale
        stale: list[str] = []
        for c in before.answer.get("claims", ()):
            quotes = [EvidenceOut(url=e["url"], quote=e["quote"]) for e in c["evidence"]]
            claim = verified_claim(c["text"], quotes, c["confidence"], sources)
            if all(" ".join(q.quote.split()) in text for q in quotes) \
                    and len(claim.evidence) == len(quotes):
                slots.append(claim)
            else:
                slots.append(None)
                stale.append(c["text"])
        entered = [notes[j] for j in change.added if notes[j].quotable]
        if change.figures_only and not stale:
            entered = []  # edited figures no claim quoted: none of them made a claim before
        fresh: list[Claim] = []
        if entered:
            sq = transcript.subquestion
            user = prompts.compress_revise_user(sq.question, stale, _by_page(entered))
            out = self._revise([self._system(prompts.COMPRESS_REVISE_SYSTEM, sq.language),
                                Message(role="user", content=user)], CompressOut,
                               "revised finding", tokens)
            if out is None:
                return None
            fresh = [claim for claim in (verified_claim(c.text, c.evidence, c.confidence,
                                                        sources) for c in out.claims)
                     if claim.evidence]
            if out.claims and not fresh:  # paraphrases only: the full call decides
                return None
        at = next((i for i, c in enumerate(slots) if c is None), len(slots))
        claims = [c for c in slots[:at] if c] + fresh + [c for c in slots[at:] if c]
        if change.empty:
            return claims
        self._keep(lineage, lines, claims_answer(claims), before.depth + 1)
        log.info("compressed sub-question %d again: %d claim(s) kept, %d stale, %d new",
                 transcript.subquestion.index, len(claims) - len(fresh), len(stale), len(fresh))
        return claims


def _known_as(lineage: dict[str, Any], lines: Sequence[str]) -> list[dict[str, Any]]:
    """The lineages a record is kept and looked for under, most specific first. A page too big
    for one call is condensed in pieces of one URL, so a condensing is also known by its first
    line: each piece keeps its own record, and a page whose first line was edited still finds
    the page's."""
    if lineage["role"] != "condense" or not lines:
        return [lineage]
    return [{**lineage, "head": line_hash(lines[0])}, lineage]


def claims_answer(claims: Sequence[Claim]) -> dict[str, Any]:
    """A finding's claims as a revision keeps them: text, confidence, each quote and its URL."""
    return {"claims": [{"text": c.text, "confidence": c.confidence,
                        "evidence": [{"url": e.url, "quote": e.quote} for e in c.evidence]}
                       for c in claims]}


def _by_page(lines: Sequence[NoteLine]) -> str:
    """Lines under the header of their page, as the notes show them."""
    out: list[str] = []
    url = None
    for line in lines:
        if line.url != url:
            if out:
                out.append("")
            url = line.url
            out.append(f"Source: {line.title} <{line.url}>")
        out.append(line.text)
    return "\n".join(out)


_PROMPTS = {role: line_hash(text) for role, text in (
    ("condense", prompts.CONDENSE_SYSTEM + prompts.CONDENSE_REVISE_SYSTEM),
    ("queries", prompts.CONTROLLER_SYSTEM + prompts.CONTROLLER_REVISE_SYSTEM),
    ("compress", prompts.COMPRESS_SYSTEM + prompts.COMPRESS_REVISE_SYSTEM),
    ("review", prompts.REVIEW_SYSTEM), ("choose", prompts.CHOOSE_SYSTEM))}
