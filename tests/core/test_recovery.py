"""The shrink loop against an engine that enforces a real window on what it is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pytest

from core.overflow.compaction import pairing_is_valid
from core.models import ReportDraft, SectionDraft
from core.models import Claim, Evidence, Finding, ResearchPlan, SubQuestion, Transcript
from core.overflow.recovery import compress_with_shrink, report_with_shrink, run_with_shrink
from core.overflow.shrink import CannotShrink, render_findings
from core.signals import ContextOverflow, Fatal, RateLimited
from core.overflow.tokens import TokenEstimator, content_bytes
from tests.core.test_compaction import ZH_TEXT, research_round


@dataclass
class FakeModel:
    model: str = "fake-1"


@dataclass
class WindowedEngine:
    """Counts tokens with its own tokenizer (2.5 bytes/token: our estimate is off on purpose)
    and raises ContextOverflow like a provider would when the request does not fit."""

    limit: int
    kind: str = "context_window"
    numbers: bool = True
    frame_tokens: int = 300  # its system prompt, schema and so on
    name: str = "windowed"
    model: FakeModel = field(default_factory=FakeModel)
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    max_output_tokens: int = 1_000
    spill_dir: None = None
    calls: list[tuple[int, int]] = field(default_factory=list)  # (input tokens, max_tokens)

    def _check(self, input_bytes: int, max_tokens: int) -> None:
        tokens = int(input_bytes / 2.5) + self.frame_tokens
        self.calls.append((tokens, max_tokens))
        counted = tokens + max_tokens if self.kind != "input_window" else tokens
        if counted > self.limit:
            if not self.numbers:
                raise ContextOverflow("prompt is too long", limit_kind=self.kind)
            raise ContextOverflow("too long", limit=self.limit, requested=counted,
                                  input_tokens=tokens, output_tokens=max_tokens,
                                  limit_kind=self.kind, provider="fake", model=self.model.model)

    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        self._check(content_bytes(transcript.messages), max_tokens or self.max_output_tokens)
        self.last_messages = list(transcript.messages)
        return Finding(subquestion_index=transcript.subquestion.index,
                       subquestion=transcript.subquestion.question, claims=())

    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        self._check(len(render_findings(findings).encode()), max_tokens or self.max_output_tokens)
        return ReportDraft(title="t", summary="s", sections=tuple(
            SectionDraft(subquestion_index=f.subquestion_index, heading=f.subquestion, body="b")
            for f in findings))


def make_transcript(rounds: int, size: int = 2_000, chinese: bool = False) -> Transcript:
    msgs = []
    for i in range(rounds):
        msgs += research_round(i, 2, size, chinese)
    return Transcript(subquestion=SubQuestion(index=1, question="Why?"), messages=msgs)


def make_findings(n: int, chinese: bool = False) -> list[Finding]:
    text = ZH_TEXT if chinese else "Capacity fades faster at high temperature. "
    return [Finding(subquestion_index=i, subquestion=f"Question {i}?", claims=tuple(
        Claim(text=text * 3, evidence=tuple(
            Evidence(url=f"https://e.org/{i}/{k}/{e}", title="T", quote=text * 8)
            for e in range((i + k) % 3 + 1)))
        for k in range(3))) for i in range(n)]


PLAN = ResearchPlan(topic="batteries", brief="b", subquestions=(SubQuestion(index=0, question="q"),))


# --- the loop ------------------------------------------------------------------------------

def test_returns_first_success_without_shrinking() -> None:
    def shrink(*_: object) -> int:
        raise AssertionError("no overflow, no shrink")

    assert run_with_shrink(lambda s: s * 2, 21, shrink, size=lambda s: s) == 42


def test_shrinks_until_it_fits_and_logs_sizes() -> None:
    seen, logs = [], []

    def call(n: int) -> str:
        seen.append(n)
        if n > 10:
            raise ContextOverflow("big", limit=10, requested=n, limit_kind="input_window")
        return f"ok at {n}"

    out = run_with_shrink(call, 40, lambda n, sig, attempt: n // 2, size=lambda n: n,
                          log=logs.append, what="test call")
    assert out == "ok at 10" and seen == [40, 20, 10]
    assert logs[0] == ("test call: context overflow (input_window: 40 > 10); attempt 1/4 "
                       "shrank it from ~40 to ~20 tokens and calls again")


def overflowing(n: int) -> str:
    raise ContextOverflow("always", model="m1", provider="p")


@pytest.mark.parametrize("shrink,why", [
    (lambda n, sig, a: n - 1, "still too large after 4 attempts"),
    (lambda n, sig, a: n, "no progress"),
    (lambda n, sig, a: (_ for _ in ()).throw(CannotShrink("empty")), "nothing left to cut"),
])
def test_gives_up_with_fatal_saying_what_to_change(shrink, why: str) -> None:
    with pytest.raises(Fatal) as info:
        run_with_shrink(overflowing, 100, shrink, size=lambda n: n)
    assert why in str(info.value)
    assert "RESEARCHFLOW_CONTEXT_WINDOWS" in str(info.value) and "larger context" in str(info.value)
    assert isinstance(info.value.__cause__, ContextOverflow) and info.value.model == "m1"


def test_other_signals_pass_through_untouched() -> None:
    def call(_: int) -> str:
        raise RateLimited("slow down", retry_after=2)

    with pytest.raises(RateLimited):
        run_with_shrink(call, 1, lambda *a: 0, size=lambda n: n)


# --- compress -------------------------------------------------------------------------------

@pytest.mark.parametrize("chinese", [False, True])
def test_compress_with_numbers_cuts_to_fit_in_few_calls(chinese: bool) -> None:
    transcript = make_transcript(10, chinese=chinese)
    original = list(transcript.messages)
    engine = WindowedEngine(limit=8_000)
    compress_with_shrink(engine, transcript)
    tokens, max_tokens = engine.calls[-1]
    assert tokens + max_tokens <= 8_000
    assert len(engine.calls) == 2  # the numbers make the cut, not a walk down the seed's ladder
    sent = engine.last_messages
    assert sent == original[:len(sent)] and pairing_is_valid(sent)
    assert transcript.messages == original  # the caller's transcript is untouched


def test_compress_without_numbers_drops_one_turn_per_attempt() -> None:
    transcript = make_transcript(5)
    per_round = content_bytes(research_round(0, 2, 2_000))
    total = content_bytes(transcript.messages)
    # Fits once two rounds are gone.
    engine = WindowedEngine(limit=int((total - 2 * per_round) / 2.5) + 300 + 1_000 + 50,
                            numbers=False)
    compress_with_shrink(engine, transcript)
    assert len(engine.calls) == 3
    assert len(engine.last_messages) == len(transcript.messages) - 6


def test_output_side_overflow_lowers_max_tokens_only() -> None:
    transcript = make_transcript(2)
    engine = WindowedEngine(limit=0, kind="context_window_incl_output", max_output_tokens=8_000)
    prompt = int(content_bytes(transcript.messages) / 2.5) + 300
    engine.limit = prompt + 5_000  # the prompt fits, 8 000 tokens of answer do not
    compress_with_shrink(engine, transcript)
    assert len(engine.calls) == 2
    assert engine.calls[1][0] == prompt and engine.calls[1][1] <= 5_000
    assert engine.last_messages == transcript.messages


def test_compress_gives_up_when_even_one_round_does_not_fit() -> None:
    engine = WindowedEngine(limit=1_500)
    with pytest.raises(Fatal, match="compress sub-question 1"):
        compress_with_shrink(engine, make_transcript(3, size=1_000))


# --- report ---------------------------------------------------------------------------------

@pytest.mark.parametrize("chinese", [False, True])
def test_report_with_numbers_one_cut_keeps_consistent_findings(chinese: bool) -> None:
    findings = make_findings(6, chinese)
    full = int(len(render_findings(findings).encode()) / 2.5) + 300
    engine = WindowedEngine(limit=full // 2 + 1_000)
    draft, kept = report_with_shrink(engine, PLAN, findings, prompt_overhead_tokens=300)
    assert len(engine.calls) == 2  # the overflow, then one cut that fits
    assert sum(engine.calls[-1]) <= engine.limit
    assert 0 < len(kept) < len(findings)
    assert [f.subquestion_index for f in kept] == sorted(f.subquestion_index for f in kept)
    assert [s.subquestion_index for s in draft.sections] == [f.subquestion_index for f in kept]
    whole = [f for f in kept if f in findings]
    part = [f for f in kept if f not in findings]  # the best finding cut, refilling the room
    dropped = [f for f in findings if f.subquestion_index not in
               {k.subquestion_index for k in kept}]
    assert len(part) <= 1 and dropped
    assert max(f.support for f in dropped) <= min(f.support for f in whole)
    assert len(render_findings(kept)) > len(render_findings(whole))


def test_report_fits_before_the_first_call_when_the_window_is_known() -> None:
    findings = make_findings(6)
    full = int(len(render_findings(findings).encode()) / 2.5) + 300
    # An estimator calibrated to the engine's tokenizer (as usage reports make it) fits first
    # time; the default bytes/3 undercounts this tokenizer, overflows once, then fits.
    calibrated = TokenEstimator()
    for _ in range(40):
        calibrated.calibrate(25_000, 10_000, model="fake-1")
    for estimator, calls in ((calibrated, 1), (TokenEstimator(), 2)):
        engine = WindowedEngine(limit=full // 2 + 1_000, estimator=estimator)
        _, kept = report_with_shrink(engine, PLAN, findings, window=engine.limit,
                                     prompt_overhead_tokens=300)
        assert len(engine.calls) == calls and len(kept) < len(findings)


def test_report_without_numbers_follows_the_seed_ladder() -> None:
    findings = make_findings(6)
    full = int(len(render_findings(findings).encode()) / 2.5) + 300
    engine = WindowedEngine(limit=int(full * 0.75) + 1_000, numbers=False)
    logs: list[str] = []
    _, kept = report_with_shrink(engine, PLAN, findings, prompt_overhead_tokens=300,
                                 log=logs.append)
    assert 2 <= len(engine.calls) <= 4 and sum(engine.calls[-1]) <= engine.limit
    assert all("write report: context overflow" in line for line in logs)


def test_report_that_cannot_fit_fails_clearly() -> None:
    engine = WindowedEngine(limit=200)
    with pytest.raises(Fatal, match="write report"):
        report_with_shrink(engine, PLAN, make_findings(3))


def test_report_frame_comes_from_the_engine_and_prefit_can_be_off() -> None:
    findings = make_findings(6)
    full = int(len(render_findings(findings).encode()) / 2.5) + 300
    frames: list[ResearchPlan] = []

    class FramedEngine(WindowedEngine):
        def report_frame_tokens(self, plan: ResearchPlan) -> int:
            frames.append(plan)
            return self.frame_tokens

    engine = FramedEngine(limit=full // 2 + 1_000)
    _, kept = report_with_shrink(engine, PLAN, findings, window=engine.limit, prefit=False)
    assert frames == [PLAN]
    assert len(engine.calls) == 2  # prefit off: the first call overflows, one cut fits
    tokens, max_tokens = engine.calls[-1]
    # The engine's exact frame (not plan + 2 000) leaves the findings nearly all the room.
    assert 0.85 * (engine.limit - max_tokens) <= tokens <= engine.limit - max_tokens
