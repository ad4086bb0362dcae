"""One research engine whose roles run on different models (a model per role).

`RoutedEngine` holds one `LLMEngine` per distinct model and sends each role to its own: plan
(and the supervisor's review), queries (choosing pages, follow-up searches, and rewriting
searches that found nothing readable), condense, compress (with its checkpoint summaries) and
report. Callers that fit a role's request to its model's window ask `for_role(role)` for the
engine behind it, so windows, output caps and what an overflow taught stay per model.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from core.models import ReportDraft
from core.models import (FollowUp, Finding, ResearchPlan, SearchResult, Source, SubQuestion,
                         Topic, Transcript)

ROLES = ("plan", "queries", "condense", "compress", "report")


class RoutedEngine:
    def __init__(self, default, by_role: Mapping[str, object]) -> None:
        unknown = set(by_role) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}; roles are {', '.join(ROLES)}")
        self.engines = {role: by_role.get(role, default) for role in ROLES}
        report = self.engines["report"]
        others = ", ".join(f"{role}: {e.model.provider}:{e.model.model}"
                           for role, e in self.engines.items() if e is not report)
        self.name = report.name + (f" ({others})" if others else "")
        self.model = report.model  # what the report was written with

    def for_role(self, role: str):
        return self.engines[role]

    def context_window(self) -> int | None:
        return self.engines["report"].context_window()

    def notice_for(self, language: str | None) -> str | None:
        return self.engines["report"].notice_for(language)

    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan:
        return self.engines["plan"].plan(topic, max_tokens=max_tokens)

    def next_queries(self, transcript: Transcript, round_index: int, *,
                     max_tokens: int | None = None, scale: float = 1.0) -> list[str]:
        return self.engines["queries"].next_queries(transcript, round_index,
                                                    max_tokens=max_tokens, scale=scale)

    def rewrite_queries(self, subquestion: SubQuestion, failed: Sequence[str],
                        seen: Sequence[SearchResult], *,
                        max_tokens: int | None = None) -> list[str]:
        return self.engines["queries"].rewrite_queries(subquestion, failed, seen,
                                                       max_tokens=max_tokens)

    def choose_pages(self, transcript: Transcript, candidates: Sequence[SearchResult],
                     limit: int, *, max_tokens: int | None = None) -> list[int]:
        return self.engines["queries"].choose_pages(transcript, candidates, limit,
                                                    max_tokens=max_tokens)

    def review(self, plan: ResearchPlan, findings: Sequence[Finding], gaps: Sequence[str],
               wave: int, limit: int, *, max_tokens: int | None = None,
               scale: float = 1.0) -> list[FollowUp]:
        return self.engines["plan"].review(plan, findings, gaps, wave, limit,
                                           max_tokens=max_tokens, scale=scale)

    def condense(self, subquestion: SubQuestion, source: Source, *,
                 max_tokens: int | None = None) -> str:
        return self.engines["condense"].condense(subquestion, source, max_tokens=max_tokens)

    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        return self.engines["compress"].compress(transcript, max_tokens=max_tokens)

    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        return self.engines["report"].write_report(plan, findings, max_tokens=max_tokens)

    def report_frame_tokens(self, plan: ResearchPlan) -> int:
        return self.engines["report"].report_frame_tokens(plan)
