"""The research roles every engine plays: plan, choose queries, condense, compress, write.

Two engines implement this protocol: the offline extractive engine (no network, no weights) and
the LLM engine (any `core.llm` chat model). The pipeline only ever talks to this protocol.

Citations are never numbered by an engine. `write_report` cites evidence by the keys that
`core.reports.report.evidence_catalog` assigns (`[E1]`, `[E2]`, ...);
`core.reports.report.assemble` turns those into numbered references in code. The draft it returns
(`ReportDraft`) is data, with the other data in `core.models`.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from core.models import (FollowUp, Finding, ReportDraft, ResearchPlan, SearchResult,
                         SectionDraft, Source, SubQuestion, Topic, Transcript)

__all__ = ["ReportDraft", "ResearchEngine", "SectionDraft"]


@runtime_checkable
class ResearchEngine(Protocol):
    name: str

    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan: ...

    def for_role(self, role: str) -> "ResearchEngine":
        """The engine that plays `role` (plan, queries, condense, compress, report): itself,
        unless the roles run on different models (core.engine.model_driven.routed)."""
        ...

    def context_window(self) -> int | None:
        """The model's context window in tokens (known, learned or default); None when the
        engine has no model (the offline engine)."""
        ...

    def notice_for(self, language: str | None) -> str | None:
        """The notice under a report's title that this engine writes in `language` (the
        offline engine says its report is quoted, not written), or None."""
        ...

    def next_queries(self, transcript: Transcript, round_index: int, *,
                     max_tokens: int | None = None, scale: float = 1.0) -> list[str]:
        """Queries for another research round, or [] when the sub-question is answered.

        `max_tokens` and `scale` (the share of the input room the notes may use) come from
        the shrink path (core.overflow.roles) after an overflow; engines without a model
        window ignore them.
        """
        ...

    def rewrite_queries(self, subquestion: SubQuestion, failed: Sequence[str],
                        seen: Sequence[SearchResult], *,
                        max_tokens: int | None = None) -> list[str]:
        """At most three more specific queries for `subquestion`, whose searches `failed` found
        nothing readable (no results, none readable, none worth reading); `seen` are the results
        they did return. Never a query already run (the failed ones or the sub-question's own,
        compared case- and space-insensitively); [] when there is nothing better to try."""
        ...

    def choose_pages(self, transcript: Transcript, candidates: Sequence[SearchResult],
                     limit: int, *, max_tokens: int | None = None) -> list[int]:
        """Which of `candidates` to read (positions in the list, best first, at most `limit`),
        judged from their titles and snippets and what the transcript already holds."""
        ...

    def condense(self, subquestion: SubQuestion, source: Source, *,
                 max_tokens: int | None = None) -> str:
        """Notes on what `source` says about the sub-question: sentences of the page, verbatim."""
        ...

    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        """The researcher's transcript as a finding whose quotes appear verbatim in its sources.

        May raise `core.signals.ContextOverflow`; the caller shrinks the transcript and retries.
        """
        ...

    def review(self, plan: ResearchPlan, findings: Sequence[Finding], gaps: Sequence[str],
               wave: int, limit: int, *, max_tokens: int | None = None,
               scale: float = 1.0) -> list[FollowUp]:
        """The supervisor: follow-up sub-questions (at most `limit`) for what the findings of
        the waves so far leave open (`gaps`, from `core.topics.waves.gaps`), or [] when done."""
        ...

    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        """One section per section of the plan. May raise ContextOverflow; the caller shrinks
        findings."""
        ...
