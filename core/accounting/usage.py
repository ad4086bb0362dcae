"""What one provider call cost: the row the usage ledger stores, and totals over many rows.

A `CallRecord` is written for every call to a paid service (an LLM provider or SerpAPI),
successful or not. Tokens come from the provider's own usage fields; only when a provider
reports none are they estimated, and `tokens_estimated` says so. `cost_usd` is None when the
model has no known price (see `core.accounting.prices`). Nothing here performs I/O: `core.store`
writes the records and `core.accounting.ledger` decides when.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

CallRole = Literal["plan", "choose", "queries", "rewrite", "condense", "compress", "review",
                   "research",  # a fallback only: the extractive engine researched instead
                   "report", "checkpoint", "search", "other"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class CallRecord:
    """One call to a billed service. `outcome` is "ok", the signal's class name, "served": a
    repeat answered from the call memo (core.accounting.memo), no request made and cost 0, or
    "fallback": not a call but a role the extractive engine answered because the model's
    answers stayed invalid (core.engine.fallback; provider "offline", cost 0)."""

    call_id: str
    run_id: str
    batch_id: str
    topic_id: str | None
    subquestion_index: int | None
    role: CallRole
    provider: str
    model: str
    outcome: str = "ok"
    input_tokens: int | None = None  # all input tokens, cached ones included
    cached_input_tokens: int | None = None  # the part served from the provider's prompt cache
    output_tokens: int | None = None  # all output tokens, reasoning/thinking included
    reasoning_tokens: int | None = None  # the part spent on reasoning/thinking
    tokens_estimated: bool = False
    latency_ms: float = 0.0
    cost_usd: float | None = None
    error: str | None = None  # masked, short: what the signal said (never a key)
    created_at: datetime = field(default_factory=_now)


@dataclass(frozen=True)
class UsageTotals:
    """Sums over ledger rows (a topic, a batch, a run or a report)."""

    calls: int = 0
    failed_calls: int = 0
    searches: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls whose model had no known price: cost_usd is a lower bound
    # repeats answered from the call memo (core.accounting.memo): part of calls, at $0
    served_calls: int = 0
    fallbacks: int = 0  # roles the extractive engine answered (core.engine.fallback): not calls
    fallback_roles: str = ""  # those roles, comma-separated
    unknown: str = ""  # why the totals could not be read ("" when they were)

    def line(self) -> str:
        """One human line, e.g. for the end of `researchflow run`."""
        if self.unknown:
            return f"usage: unavailable ({self.unknown})"
        if not self.calls:
            return "usage: no provider calls (offline engine, or everything served from cache)"
        cost = f"${self.cost_usd:.4f}"
        if self.unpriced_calls:
            cost += f" + {self.unpriced_calls} call(s) with no known price"
        cached = f" ({self.cached_input_tokens:,} cached)" if self.cached_input_tokens else ""
        reasoning = f" ({self.reasoning_tokens:,} reasoning)" if self.reasoning_tokens else ""
        failed = f", {self.failed_calls} failed" if self.failed_calls else ""
        failed += f", {self.served_calls} served from the memo" if self.served_calls else ""
        searches = f", {self.searches} searches" if self.searches else ""
        fallbacks = (f"; {self.fallbacks} answer(s) from the extractive engine "
                     f"({self.fallback_roles}): the model's stayed invalid"
                     if self.fallbacks else "")
        return (f"usage: {self.calls} calls{failed}{searches}; tokens {self.input_tokens:,} in"
                f"{cached} / {self.output_tokens:,} out{reasoning}; cost {cost}{fallbacks}")
