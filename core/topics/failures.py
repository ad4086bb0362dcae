"""Why a topic failed, in one line a user can act on: the step, the signal, its cause, what to do.

    research #2: RateLimited by openai after 4 attempts (HTTP 429: Rate limit reached ...);
    lower RESEARCHFLOW_MAX_SUBQUESTION_WORKERS or RESEARCHFLOW_MAX_CALLS_PER_MINUTE, or raise
    the provider limit

The same line goes to the CLI, `topics.error` in DuckDB, the batch table and the Prefect
flow-run message, so nobody has to dig the cause out of a log. `TopicFailed` carries it; its
`cause` is the original exception (a `core.signals.Signal` when a provider or our budget said
no). It never contains a key: signal messages are masked where they are made, and the line again
(by value and by pattern, core.secrets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from core.signals import (BudgetExceeded, ContextOverflow, Fatal, RateLimited, Signal, Transient,
                          mask_secrets)

_DETAIL_CHARS = 240

ADVICE: dict[type, str] = {
    RateLimited: ("lower RESEARCHFLOW_MAX_SUBQUESTION_WORKERS or RESEARCHFLOW_MAX_CALLS_PER_MINUTE, "
                  "or raise the provider limit; a rerun reuses every call that finished"),
    Transient: ("the provider or the network kept failing; rerun later (every call that finished "
                "is reused from the cache)"),
    ContextOverflow: ("use a model with a larger context window, or tell researchflow the real "
                      "one with RESEARCHFLOW_CONTEXT_WINDOWS"),
    Fatal: "fix the configuration and rerun",
    BudgetExceeded: "raise the budget to let it finish",
}


@dataclass(frozen=True)
class StepFailure:
    step: str  # "plan", "research #2", "compress #2", "report", "store"
    error: BaseException


def describe(step: str, exc: BaseException) -> str:
    """`step: Signal by provider after N attempts (HTTP status: cause); what to do`."""
    if not isinstance(exc, Signal):
        return f"{step}: {type(exc).__name__}: {_clip(mask_secrets(str(exc)))}"
    who = f" by {exc.provider}" if exc.provider and not isinstance(exc, BudgetExceeded) else ""
    attempts = getattr(exc, "attempts", None)
    tries = f" after {attempts} attempts" if attempts and attempts > 1 else ""
    status = f"HTTP {exc.status}: " if exc.status and f"HTTP {exc.status}" not in exc.message \
        else ""
    advice = next((a for t, a in ADVICE.items() if isinstance(exc, t)), "")
    if exc.hint and not isinstance(exc, (RateLimited, Transient)):  # theirs say "retry later"
        advice = exc.hint
    line = f"{step}: {type(exc).__name__}{who}{tries} ({status}{_clip(exc.message)})"
    return f"{line}; {advice}" if advice else line


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS - 1] + "…"


class NoEvidence(RuntimeError):
    """No part of the topic is answered by evidence about it: an empty corpus, or one with no
    page on the subject (core.relevance.gate). Not a success with zero references, nor a report
    quoting pages about something else."""

    def __init__(self, topic: str, search: str, about: str | None = None) -> None:
        where = "the corpus" if search == "corpus" else f"the {search} search"
        subject = " ".join((about or topic).split())[:120]
        super().__init__(f"{where} has no page about {subject!r}: nothing to cite, "
                         f"no report (check the corpus folder, or ask about what it holds)")


class TopicFailed(RuntimeError):
    """A topic stopped at a step. `str()` is the one line for users; `cause` the first error."""

    def __init__(self, failures: Sequence[StepFailure]) -> None:
        if not failures:
            raise ValueError("TopicFailed needs at least one failure")
        self.failures = tuple(failures)
        first = self.failures[0]
        self.step = first.step
        self.cause = first.error
        more = len(self.failures) - 1
        line = describe(first.step, first.error)
        if more:
            others = ", ".join(f.step for f in self.failures[1:4])
            line += f" [{more} more step(s) failed: {others}]"
        super().__init__(mask_secrets(line))

    @property
    def expected(self) -> bool:
        """Whether the line says it all (see `expected`): no traceback is worth showing."""
        return all(expected(f.error) for f in self.failures)

    @property
    def budget_scope(self) -> str | None:
        """"topic" or "batch" when a budget stopped the topic, else None."""
        cause = self.cause
        return cause.scope if isinstance(cause, BudgetExceeded) else None


class BatchIncomplete(RuntimeError):
    """The end of a batch in which some topics did not produce a report: each row's reason is
    in its table, and was logged where it happened."""


def expected(exc: BaseException) -> bool:
    """A failure a user acts on from its one line: no page about the subject, a typed signal
    (a provider's or our budget's no, with what to do), or a batch some of whose rows failed.
    Anything else is a bug, whose traceback is worth its lines."""
    if isinstance(exc, TopicFailed):
        return exc.expected
    return isinstance(exc, (NoEvidence, Signal, BatchIncomplete))
