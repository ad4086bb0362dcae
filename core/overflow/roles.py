"""The shrink path for the roles besides compress and report: plan, choosing pages, follow-up
queries, rewriting searches that found nothing readable, condense, and the supervisor's review.

Same rules as `core.overflow.recovery` (whose loop they reuse): before the call the engine fits
the request to the model's window (known, learned or default; the output side by each role's
share of it); on a `ContextOverflow` the numbers are learned and the call is made again at once,
smaller: a lower output cap when only the output did not fit, less input otherwise.

Condense is the role that meets pages bigger than any window: a page that does not fit one call
is cut into pieces that do (`core.overflow.chunking`), each piece is condensed, and the notes are
merged; a piece that still overflows (the window was smaller than we knew) is split again, never
truncated silently. An engine without a model window (the offline engine) is called directly, in one place
(`_small_call`, `_sized`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, Protocol, Sequence, TypeVar

from core.engine.base import ResearchEngine
from core.models import (Finding, FollowUp, ResearchPlan, SearchResult, Source, SubQuestion,
                         Topic, Transcript)
from core.overflow.chunking import merge_notes, pieces_for, split_text
from core.overflow.recovery import (DEFAULT_MAX_ATTEMPTS, WHAT_TO_CHANGE, learn_from,
                                    run_with_shrink)
from core.overflow.shrink import CannotShrink, input_fit, lower_max_tokens
from core.signals import ContextOverflow, Fatal

T = TypeVar("T")
log = logging.getLogger("researchflow.overflow")

MIN_OUTPUT = {"plan": 512, "queries": 128, "choose": 128, "rewrite": 128, "condense": 256,
              "review": 256}
MAX_SPLITS = 3  # a piece that overflows is split at most this many levels deep


class SizedEngine(ResearchEngine, Protocol):
    """An engine whose calls are sized to a model's window (core.engine.model_driven.calls.ModelCalls)."""

    def output_tokens(self, role: str, max_tokens: int | None = None) -> int: ...

    def request_budget(self) -> int: ...

    def chars_for(self, tokens: int, sample: str) -> int: ...

    def condense_room(self, subquestion: SubQuestion, source: Source, *,
                      max_tokens: int | None = None) -> int: ...


def _sized(engine: ResearchEngine) -> SizedEngine | None:
    """The engine as a SizedEngine when it has a model window (the offline engine has none)."""
    window = getattr(engine, "context_window", None)
    return engine if callable(window) and window() is not None else None  # type: ignore


@dataclass(frozen=True)
class _Call:
    max_tokens: int | None = None  # None: the engine's own cap for the role
    scale: float = 1.0  # share of the input room the payload may use


def _small_call(engine: ResearchEngine, role: str, call: Callable[[_Call], T], *, what: str,
                shrinkable_input: bool, log: Callable[[str], None]) -> T:
    """`call` with the engine's own sizes; on an overflow, again with a smaller request. An
    engine without a model window is simply called."""
    sized = _sized(engine)
    if sized is None:
        return call(_Call())

    def size(s: _Call) -> int:
        return sized.output_tokens(role, s.max_tokens) + int(s.scale * sized.request_budget())

    def shrink(s: _Call, sig: ContextOverflow, attempt: int) -> _Call:
        before = (sized.output_tokens(role, s.max_tokens), sized.request_budget())
        learn_from(sized, sig)
        out = sized.output_tokens(role, s.max_tokens)
        if sig.side != "input":
            lowered = lower_max_tokens(sig, out, min_output_tokens=min(out, MIN_OUTPUT[role]))
            if lowered is not None:
                return replace(s, max_tokens=lowered)
        if (out, sized.request_budget()) < before:
            return s  # the window it taught already makes the engine fit a smaller request
        if not shrinkable_input:
            raise CannotShrink(f"the {what} prompt alone does not fit the model's window")
        fit = input_fit(sig, out)
        scale = s.scale * (min(0.9, fit[1] / fit[0]) if fit and fit[0] else 0.6)
        return replace(s, scale=scale)

    return run_with_shrink(call, _Call(), shrink, size=size, what=what, log=log)


def _quiet(_: str) -> None:
    pass


def plan_with_shrink(engine: ResearchEngine, topic: Topic, *,
                     log: Callable[[str], None] = _quiet) -> ResearchPlan:
    return _small_call(engine, "plan", lambda s: engine.plan(topic, max_tokens=s.max_tokens),
                       what="plan", shrinkable_input=False, log=log)


def queries_with_shrink(engine: ResearchEngine, transcript: Transcript, round_index: int, *,
                        log: Callable[[str], None] = _quiet) -> list[str]:
    return _small_call(
        engine, "queries",
        lambda s: engine.next_queries(transcript, round_index, max_tokens=s.max_tokens,
                                      scale=s.scale),
        what=f"next queries for sub-question {transcript.subquestion.index}",
        shrinkable_input=True, log=log)


def choose_with_shrink(engine: ResearchEngine, transcript: Transcript,
                       candidates: Sequence[SearchResult], limit: int, *,
                       log: Callable[[str], None] = _quiet) -> list[int]:
    return _small_call(
        engine, "choose",
        lambda s: engine.choose_pages(transcript, candidates, limit, max_tokens=s.max_tokens),
        what=f"choice of pages for sub-question {transcript.subquestion.index}",
        shrinkable_input=False, log=log)


def rewrite_with_shrink(engine: ResearchEngine, subquestion: SubQuestion, failed: Sequence[str],
                        seen: Sequence[SearchResult], *,
                        log: Callable[[str], None] = _quiet) -> list[str]:
    """More specific searches for searches that found nothing readable. The listing of what
    they returned is small and already fitted by the engine: only the output side shrinks."""
    return _small_call(
        engine, "rewrite",
        lambda s: engine.rewrite_queries(subquestion, failed, seen, max_tokens=s.max_tokens),
        what=f"rewritten searches for sub-question {subquestion.index}",
        shrinkable_input=False, log=log)


def review_with_shrink(engine: ResearchEngine, plan: ResearchPlan, findings: Sequence[Finding],
                       gaps: Sequence[str], wave: int, limit: int, *,
                       log: Callable[[str], None] = _quiet) -> list[FollowUp]:
    return _small_call(
        engine, "review",
        lambda s: engine.review(plan, findings, gaps, wave, limit, max_tokens=s.max_tokens,
                                scale=s.scale),
        what=f"review of wave {wave}", shrinkable_input=True, log=log)


def condense_with_shrink(engine: ResearchEngine, subquestion: SubQuestion, source: Source, *,
                         log: Callable[[str], None] = _quiet) -> str:
    """Notes on a whole page: in one call when it fits, else piece by piece, merged."""
    sized = _sized(engine)
    if sized is None:
        return engine.condense(subquestion, source)
    chars = _piece_chars(sized, subquestion, source)
    if len(source.text) <= chars:
        return _condense_piece(sized, subquestion, source, source.text, 0, log)
    pieces, left_out = pieces_for(source.text, chars)
    log(f"condense {source.url}: {len(source.text)} chars in {len(pieces)} pieces of up to "
        f"{chars}" + (f"; {left_out} chars in the middle left out" if left_out else ""))
    return merge_notes(_condense_piece(sized, subquestion, source, piece, 0, log)
                       for piece in pieces)


def _piece_chars(engine: SizedEngine, subquestion: SubQuestion, source: Source,
                 max_tokens: int | None = None) -> int:
    room = engine.condense_room(subquestion, source, max_tokens=max_tokens)
    return max(200, engine.chars_for(room, source.text))


def _condense_piece(engine: SizedEngine, subquestion: SubQuestion, source: Source, text: str,
                    depth: int, log: Callable[[str], None]) -> str:
    piece = source.model_copy(update={"text": text})
    max_tokens: int | None = None
    for attempt in range(1, DEFAULT_MAX_ATTEMPTS + 1):
        try:
            return engine.condense(subquestion, piece, max_tokens=max_tokens)
        except ContextOverflow as sig:
            before = (engine.output_tokens("condense", max_tokens), engine.request_budget())
            learn_from(engine, sig)
            out = engine.output_tokens("condense", max_tokens)
            lowered = (lower_max_tokens(sig, out, min_output_tokens=min(out, MIN_OUTPUT["condense"]))
                       if sig.side != "input" else None)
            if lowered is not None:
                log(f"condense {source.url}: output-side overflow; max_tokens {out} -> {lowered}")
                max_tokens = lowered
                continue
            chars = _piece_chars(engine, subquestion, source, max_tokens)
            if chars >= len(text):
                if (out, engine.request_budget()) < before:
                    continue  # the window it taught makes this piece fit as it is
                fit = input_fit(sig, out)  # nothing new was learned: go by the error's numbers
                ratio = min(0.9, fit[1] / fit[0]) if fit and fit[0] else 0.5
                chars = max(200, int(len(text) * ratio))
            if depth >= MAX_SPLITS:
                raise _give_up(sig, source, f"still too large after {depth} splits") from sig
            parts = split_text(text, chars)
            log(f"condense {source.url}: context overflow on a {len(text)}-char piece; split "
                f"into {len(parts)} of up to {chars} chars (attempt {attempt})")
            return merge_notes(_condense_piece(engine, subquestion, source, part, depth + 1, log)
                               for part in parts)
    raise Fatal(f"condense {source.url}: no answer within {DEFAULT_MAX_ATTEMPTS} attempts",
                reason="config", hint=WHAT_TO_CHANGE)


def _give_up(sig: ContextOverflow, source: Source, why: str) -> Fatal:
    return Fatal(f"condense {source.url}: the page does not fit the model: {why}; last "
                 f"overflow: {sig.message}", provider=sig.provider, model=sig.model,
                 status=sig.status, hint=WHAT_TO_CHANGE, reason="config")
