"""The bounded shrink-and-call-again loop for `ContextOverflow` (pure logic, no Prefect).

`run_with_shrink` calls, and on a `ContextOverflow` asks a shrink strategy (`core.overflow.shrink`) for a
smaller state and calls again — at once, never sleeping: waiting does not make a prompt shorter.
Each attempt is logged with its size before and after. When the attempts run out, or a shrink
makes no progress or cannot cut further, it raises `Fatal` (from the last overflow) saying what
to change. It never returns an error string in place of a result. Any other exception passes
through untouched: rate limits and transient faults are Prefect's retries to handle.

`compress_with_shrink` and `report_with_shrink` adapt it to the two calls with the most to cut:
compressing a researcher transcript and writing the report from all findings; the other roles
(plan, follow-up queries, condense) go through the same loop in `core.overflow.roles`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from core.engine.base import ResearchEngine
from core.models import Finding, Message, ReportDraft, ResearchPlan, Transcript
from core.overflow.shrink import (CannotShrink, fit_findings, findings_budget_chars, lower_max_tokens,
                         render_findings, shrink_transcript, window_budget_chars)
from core.signals import ContextOverflow, Fatal
from core.overflow.tokens import TokenEstimator

S = TypeVar("S")
T = TypeVar("T")

DEFAULT_MAX_ATTEMPTS = 4  # calls in all: the first and three shrunk retries
DEFAULT_OUTPUT_TOKENS = 4_096
# The report prompt around the findings (system prompt, plan, output schema) when the engine
# does not say: generous, since overestimating only cuts a little more.
REPORT_FRAME_TOKENS = 2_000
WHAT_TO_CHANGE = ("use a model with a larger context window, ask for fewer sub-questions or "
                  "rounds (max_subquestions, max_rounds), or set RESEARCHFLOW_CONTEXT_WINDOWS "
                  "if the configured window for this model is wrong")


def _describe(sig: ContextOverflow) -> str:
    if sig.limit and sig.requested:
        return f"{sig.limit_kind or 'limit'}: {sig.requested} > {sig.limit}"
    return sig.limit_kind or "no numbers given"


def run_with_shrink(call: Callable[[S], T], state: S,
                    shrink: Callable[[S, ContextOverflow, int], S], *, size: Callable[[S], int],
                    max_attempts: int = DEFAULT_MAX_ATTEMPTS, what: str = "request",
                    log: Callable[[str], None] = lambda _: None) -> T:
    """`call(state)`, shrinking `state` after each ContextOverflow, at most `max_attempts` calls.

    `shrink(state, overflow, attempt)` returns a smaller state or raises `CannotShrink`;
    `size(state)` measures it (estimated tokens including the output reserve), and a shrink that
    does not reduce it counts as no progress.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return call(state)
        except ContextOverflow as sig:
            before = size(state)
            if attempt >= max_attempts:
                raise _give_up(what, f"still too large after {attempt} attempts", sig) from sig
            try:
                smaller = shrink(state, sig, attempt)
            except CannotShrink as exc:
                raise _give_up(what, f"nothing left to cut ({exc})", sig) from sig
            after = size(smaller)
            if after >= before:
                why = f"shrinking made no progress ({before} → {after})"
                raise _give_up(what, why, sig) from sig
            log(f"{what}: context overflow ({_describe(sig)}); attempt {attempt}/{max_attempts} "
                f"shrank it from ~{before} to ~{after} tokens and calls again")
            state = smaller


def _give_up(what: str, why: str, sig: ContextOverflow) -> Fatal:
    return Fatal(f"{what}: the context does not fit the model: {why}; last overflow: "
                 f"{sig.message} ({_describe(sig)})", provider=sig.provider, model=sig.model,
                 status=sig.status, hint=WHAT_TO_CHANGE, reason="config")


# --- the two adapters ---------------------------------------------------------------------------

def _engine_model(engine: Any) -> str | None:
    model = getattr(engine, "model", None)
    return getattr(model, "model", None) if model is not None else None


def _engine_estimator(engine: Any) -> TokenEstimator:
    est = getattr(engine, "estimator", None)  # an engine without a model counts at the default
    return est if isinstance(est, TokenEstimator) else TokenEstimator()


def learn_from(engine: Any, sig: ContextOverflow) -> None:
    """The provider's numbers win over our table for the rest of the run (core.overflow.windows)."""
    limits = getattr(engine, "limits", None)
    if limits is not None and hasattr(limits, "learn"):
        limits.learn(_engine_model(engine), sig)


def _report_frame_tokens(engine: Any, plan: ResearchPlan, est: TokenEstimator,
                         model: str | None) -> int:
    """The report prompt's tokens besides the findings: the engine's own count when it offers
    `report_frame_tokens(plan)`, else the plan plus a generous frame. Overestimating it wastes
    window (2 000 tokens are an eighth of a 16k window), so an engine that knows should say."""
    frame = getattr(engine, "report_frame_tokens", None)
    if callable(frame):
        return int(frame(plan))
    return est.estimate(plan.model_dump_json(), model=model) + REPORT_FRAME_TOKENS


def _min_output(current: int) -> int:
    """Lower max_tokens only while the answer keeps half its room (and at least 1024 tokens)."""
    return min(current, max(1024, current // 2))


@dataclass(frozen=True)
class _TranscriptCall:
    messages: tuple[Message, ...]
    max_tokens: int


def compress_with_shrink(engine: ResearchEngine, transcript: Transcript, *,
                         max_output_tokens: int | None = None, spill_dir: Path | None = None,
                         max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                         log: Callable[[str], None] = lambda _: None) -> Finding:
    """`engine.compress(transcript)`, shrinking the transcript's messages on each overflow.

    An output-side overflow lowers max_tokens; otherwise the last AI turn goes (ARCHITECTURE.md), then
    long tool results are cut (see `core.overflow.shrink.shrink_transcript`). The caller's transcript is
    never modified; the finding keeps the full raw notes because sources are untouched.
    """
    est, model = _engine_estimator(engine), _engine_model(engine)
    out = max_output_tokens or getattr(engine, "max_output_tokens", None) or DEFAULT_OUTPUT_TOKENS
    spill = spill_dir if spill_dir is not None else getattr(engine, "spill_dir", None)

    def call(s: _TranscriptCall) -> Finding:
        shrunk = transcript.model_copy(update={"messages": list(s.messages)})
        return engine.compress(shrunk, max_tokens=s.max_tokens)

    def shrink(s: _TranscriptCall, sig: ContextOverflow, attempt: int) -> _TranscriptCall:
        learn_from(engine, sig)
        lowered = lower_max_tokens(sig, s.max_tokens, min_output_tokens=_min_output(s.max_tokens))
        if lowered is not None:
            return replace(s, max_tokens=lowered)
        smaller = shrink_transcript(s.messages, sig, max_output_tokens=s.max_tokens,
                                    spill_dir=spill)
        return replace(s, messages=tuple(smaller))

    def size(s: _TranscriptCall) -> int:
        return est.estimate(list(s.messages), model=model) + s.max_tokens

    what = f"compress sub-question {transcript.subquestion.index}"
    return run_with_shrink(call, _TranscriptCall(tuple(transcript.messages), out), shrink,
                           size=size, max_attempts=max_attempts, what=what, log=log)


@dataclass(frozen=True)
class _ReportCall:
    findings: tuple[Finding, ...]
    max_tokens: int


def report_with_shrink(engine: ResearchEngine, plan: ResearchPlan, findings: Sequence[Finding],
                       *, window: int | None = None, max_output_tokens: int | None = None,
                       prompt_overhead_tokens: int | None = None,
                       max_attempts: int = DEFAULT_MAX_ATTEMPTS, prefit: bool = True,
                       log: Callable[[str], None] = lambda _: None,
                       ) -> tuple[ReportDraft, list[Finding]]:
    """`engine.write_report(plan, findings)`, cutting findings to fit; returns (draft, kept).

    The report must be assembled from the kept findings, so its references match the evidence
    the model saw. With a known `window` the findings are fitted before the first call (estimate
    first, ARCHITECTURE.md); each overflow then lowers max_tokens (output side) or cuts the findings to
    `core.overflow.shrink.findings_budget_chars`, whole findings first, least-supported first.
    `prefit=False` skips the fit before the first call, leaving `window` only as the fallback
    for errors without numbers (bench/overflow.py measures recovery from a real overflow).
    """
    est, model = _engine_estimator(engine), _engine_model(engine)
    out = max_output_tokens or getattr(engine, "max_output_tokens", None) or DEFAULT_OUTPUT_TOKENS
    overhead = (prompt_overhead_tokens if prompt_overhead_tokens is not None
                else _report_frame_tokens(engine, plan, est, model))

    def budget_chars(rendered: str, sig: ContextOverflow | None, max_tokens: int) -> int:
        cpt = est.chars_per_token(rendered[:20_000], model=model)
        if sig is None:
            return window_budget_chars(window or 0, prompt_overhead_tokens=overhead,
                                       max_output_tokens=max_tokens, chars_per_token=cpt)
        return findings_budget_chars(sig, len(rendered), window=window,
                                     prompt_overhead_tokens=overhead,
                                     max_output_tokens=max_tokens, chars_per_token=cpt)

    def fit(fs: Sequence[Finding], chars: int) -> tuple[Finding, ...]:
        kept = tuple(fit_findings(fs, chars))
        if not kept:
            raise CannotShrink("no findings would be left")
        return kept

    start = tuple(findings)
    rendered = render_findings(start)
    if prefit and window and start and len(rendered) > budget_chars(rendered, None, out):
        try:
            start = fit(start, budget_chars(rendered, None, out))
        except CannotShrink:
            pass  # send it whole: the provider's numbers, if it overflows, guide the real cut
        else:
            log(f"write report: findings cut from {len(rendered)} to "
                f"{len(render_findings(start))} chars to fit the {window}-token window "
                f"({len(findings) - len(start)} of {len(findings)} findings dropped)")

    def call(s: _ReportCall) -> tuple[ReportDraft, list[Finding]]:
        return engine.write_report(plan, s.findings, max_tokens=s.max_tokens), list(s.findings)

    def shrink(s: _ReportCall, sig: ContextOverflow, attempt: int) -> _ReportCall:
        learn_from(engine, sig)
        lowered = lower_max_tokens(sig, s.max_tokens, window=window,
                                   min_output_tokens=_min_output(s.max_tokens))
        if lowered is not None:
            return replace(s, max_tokens=lowered)
        text = render_findings(s.findings)
        return replace(s, findings=fit(s.findings, budget_chars(text, sig, s.max_tokens)))

    def size(s: _ReportCall) -> int:
        return est.estimate(render_findings(s.findings), model=model) + s.max_tokens

    return run_with_shrink(call, _ReportCall(start, out), shrink, size=size,
                           max_attempts=max_attempts, what="write report", log=log)
