"""A weak model never sinks a topic: each role whose answers stay invalid is answered by the
extractive engine instead.

`FallbackEngine` wraps the model-driven engine (one model, or one per role) role by role. When a
role's call raises `Fatal(reason="invalid_output")` (its answers stayed invalid after the
bounded re-asks of `core.engine.model_driven.calls`), the offline extractive engine plays that
role for that call: the plan from the offline planner, the choice of pages by the search
ranking, notes and findings by extractive selection, the report by extractive assembly. Every
quote stays verbatim whichever engine wrote it.

Each fallback is told: logged on `researchflow.fallback` (forwarded to the Prefect run's log,
flows.run_log) and handed to `on_fallback`, which a run's context points at its ledger (a row
with outcome 'fallback' per topic and role, which the report's header, the CLI's closing line
and the `fallbacks` view read back). With the policy "none" (`--fallback none`,
RESEARCHFLOW_FALLBACK) the topic fails instead, naming the role.

Overflows and every other signal pass through untouched: shrinking and retrying stay with
their callers (core.overflow, Prefect). What those callers read to size a role's request (its
model, window, limits, estimator and output caps) is the model engine's, forwarded by name.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal, Sequence, TypeVar, Union

from core.engine.base import ResearchEngine
from core.engine.model_driven.calls import INVALID_OUTPUT
from core.models import (FollowUp, Finding, ReportDraft, ResearchPlan, SearchResult, Source,
                         SubQuestion, Topic, Transcript)
from core.signals import Fatal

if TYPE_CHECKING:
    from core.engine.model_driven import LLMEngine, RoutedEngine
    from core.llm.base import ChatModel
    from core.overflow.tokens import TokenEstimator
    from core.overflow.windows import ContextLimits

T = TypeVar("T")
ModelEngine = Union["LLMEngine", "RoutedEngine"]
FallbackPolicy = Literal["extractive", "none"]
OnFallback = Callable[[str, Fatal], None]

log = logging.getLogger("researchflow.fallback")


def _nobody(role: str, signal: Fatal) -> None:
    pass


class FallbackEngine:
    """`ResearchEngine` over `engine`, with `offline` answering each role `engine` cannot.

    `for_role` returns a wrapper of the role's own engine (an `LLMEngine`), so callers that
    size a role's request to its model's window (core.overflow.roles) see that model's window,
    output caps and limits through the members below."""

    def __init__(self, engine: ModelEngine, offline: ResearchEngine, *,
                 policy: FallbackPolicy = "extractive", on_fallback: OnFallback = _nobody) -> None:
        self.engine = engine
        self.offline = offline
        self.policy = policy
        self.on_fallback = on_fallback

    def for_role(self, role: str) -> "FallbackEngine":
        return FallbackEngine(self.engine.for_role(role), self.offline, policy=self.policy,
                              on_fallback=self.on_fallback)

    # -- the model engine's, by name ------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def model(self) -> "ChatModel":
        return self.engine.model

    def context_window(self) -> int | None:
        return self.engine.context_window()

    def notice_for(self, language: str | None) -> str | None:
        """The model's report carries no notice, even where the extractive engine wrote a part
        (the report's header names the roles it answered)."""
        return self.engine.notice_for(language)

    def report_frame_tokens(self, plan: ResearchPlan) -> int:
        return self.engine.report_frame_tokens(plan)

    # A role's sizes: its model engine's (an LLMEngine; a RoutedEngine has none of its own).
    @property
    def limits(self) -> "ContextLimits":
        return self.engine.limits  # type: ignore[union-attr]

    @property
    def estimator(self) -> "TokenEstimator":
        return self.engine.estimator  # type: ignore[union-attr]

    @property
    def max_output_tokens(self) -> int:
        return self.engine.max_output_tokens  # type: ignore[union-attr]

    @property
    def spill_dir(self) -> Path | None:
        return self.engine.spill_dir  # type: ignore[union-attr]

    def output_tokens(self, role: str, max_tokens: int | None = None) -> int:
        return self.engine.output_tokens(role, max_tokens)  # type: ignore[union-attr]

    def request_budget(self) -> int:
        return self.engine.request_budget()  # type: ignore[union-attr]

    def chars_for(self, tokens: int, sample: str) -> int:
        return self.engine.chars_for(tokens, sample)  # type: ignore[union-attr]

    def condense_room(self, subquestion: SubQuestion, source: Source, *,
                      max_tokens: int | None = None) -> int:
        return self.engine.condense_room(  # type: ignore[union-attr]
            subquestion, source, max_tokens=max_tokens)

    # -- the roles ------------------------------------------------------------------------------
    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan:
        return self._guard("plan", lambda: self.engine.plan(topic, max_tokens=max_tokens),
                           lambda: self.offline.plan(topic))

    def next_queries(self, transcript: Transcript, round_index: int, *,
                     max_tokens: int | None = None, scale: float = 1.0) -> list[str]:
        return self._guard(
            "queries",
            lambda: self.engine.next_queries(transcript, round_index, max_tokens=max_tokens,
                                             scale=scale),
            lambda: self.offline.next_queries(transcript, round_index))

    def rewrite_queries(self, subquestion: SubQuestion, failed: Sequence[str],
                        seen: Sequence[SearchResult], *,
                        max_tokens: int | None = None) -> list[str]:
        return self._guard(
            "rewrite",
            lambda: self.engine.rewrite_queries(subquestion, failed, seen, max_tokens=max_tokens),
            lambda: self.offline.rewrite_queries(subquestion, failed, seen))

    def choose_pages(self, transcript: Transcript, candidates: Sequence[SearchResult],
                     limit: int, *, max_tokens: int | None = None) -> list[int]:
        return self._guard(
            "choose",
            lambda: self.engine.choose_pages(transcript, candidates, limit,
                                             max_tokens=max_tokens),
            lambda: self.offline.choose_pages(transcript, candidates, limit))

    def condense(self, subquestion: SubQuestion, source: Source, *,
                 max_tokens: int | None = None) -> str:
        return self._guard(
            "condense", lambda: self.engine.condense(subquestion, source, max_tokens=max_tokens),
            lambda: self.offline.condense(subquestion, source))

    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        return self._guard("compress",
                           lambda: self.engine.compress(transcript, max_tokens=max_tokens),
                           lambda: self.offline.compress(transcript))

    def quote_instead(self, transcript: Transcript) -> Finding | None:
        """The extractive engine's finding on pages the model read but quoted none of, as a
        compress fallback; None when fallbacks are off or it finds nothing to quote either.

        Asked only for a topic that would otherwise end with no evidence at all: a section left
        empty beside others with evidence is the model's answer, and the next wave's question."""
        if self.policy == "none" or not transcript.sources:
            return None
        quoted = self.offline.compress(transcript)
        if not quoted.support:
            return None
        self._fell_back("compress", Fatal("no claim of the model's quoted the pages read",
                                          reason=INVALID_OUTPUT))
        return quoted

    def review(self, plan: ResearchPlan, findings: Sequence[Finding], gaps: Sequence[str],
               wave: int, limit: int, *, max_tokens: int | None = None,
               scale: float = 1.0) -> list[FollowUp]:
        return self._guard(
            "review",
            lambda: self.engine.review(plan, findings, gaps, wave, limit, max_tokens=max_tokens,
                                       scale=scale),
            lambda: self.offline.review(plan, findings, gaps, wave, limit))

    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        return self._guard(
            "report", lambda: self.engine.write_report(plan, findings, max_tokens=max_tokens),
            lambda: self.offline.write_report(plan, findings))

    def _guard(self, role: str, call: Callable[[], T], offline: Callable[[], T]) -> T:
        try:
            return call()
        except Fatal as signal:
            if signal.reason != INVALID_OUTPUT:
                raise
            if self.policy == "none":
                raise Fatal(f"the {role} role failed: {signal.message}", reason=INVALID_OUTPUT,
                            provider=signal.provider, model=signal.model,
                            hint="--fallback extractive (RESEARCHFLOW_FALLBACK) lets the "
                                 "extractive engine answer a role the model cannot") from signal
            self._fell_back(role, signal)
            return offline()

    def answered_for(self, role: str, why: str) -> None:
        """Tell a fallback the flow made (the extractive engine researching a topic whose model
        found nothing to quote), as `_guard` tells its own."""
        self._fell_back(role, Fatal(why, reason=INVALID_OUTPUT))

    def _fell_back(self, role: str, signal: Fatal) -> None:
        log.warning("%s: the model's answers stayed invalid (%s); the extractive engine "
                    "answered for it", role, signal.message)
        self.on_fallback(role, signal)
