"""core.topics.failures: the one line a user sees for a failed step (`describe`) for each kind of
signal and for plain exceptions, key masking, and `TopicFailed` (first step, further failures,
cause, budget scope)."""

from __future__ import annotations

import pytest

from core.topics.failures import StepFailure, TopicFailed, describe
from core.accounting.ledger import CallScope, Ledger
from core.signals import (BudgetExceeded, ContextOverflow, Fatal, RateLimited, Transient,
                          classify_payload)
from core.accounting.usage import CallRecord
from tests.fakes import providers as fake

KEY = "sk-proj-Abcdefghijklmnop0123456789"


def rate_limited(attempts: int | None = 4, hint: str | None = None) -> RateLimited:
    exc = RateLimited("openai HTTP 429: Rate limit reached for gpt-4o-mini", provider="openai",
                      model="gpt-4o-mini", status=429, retry_after=7.0, hint=hint)
    if attempts is not None:
        exc.attempts = attempts  # what tasks.retry.note_attempts sets
    return exc


def budget_exceeded(scope: str = "topic") -> BudgetExceeded:
    """A real one, from the ledger's own check."""
    ledger = Ledger()
    ledger.record(CallRecord(call_id="c", run_id="r", batch_id="b", topic_id="t",
                             subquestion_index=None, role="plan", provider="openai",
                             model="gpt-4o-mini", cost_usd=0.009))
    caps = {"max_topic_cost_usd": 0.01} if scope == "topic" else {"max_batch_cost_usd": 0.01}
    with pytest.raises(BudgetExceeded) as info:
        ledger.check(CallScope(run_id="r", topic_id="t", **caps), 0.002, "condense")
    return info.value


# --- describe ---------------------------------------------------------------------------------

def test_rate_limited_names_provider_status_attempts_and_the_default_advice() -> None:
    line = describe("research #2", rate_limited())

    assert line.startswith("research #2: RateLimited by openai after 4 attempts (")
    assert line.count("HTTP 429") == 1  # the message already says it: not twice
    assert "Rate limit reached for gpt-4o-mini" in line
    assert "RESEARCHFLOW_MAX_SUBQUESTION_WORKERS" in line
    assert "RESEARCHFLOW_MAX_CALLS_PER_MINUTE" in line


@pytest.mark.parametrize("attempts", [None, 1])
def test_a_single_attempt_is_not_mentioned(attempts) -> None:
    line = describe("plan", rate_limited(attempts=attempts))

    assert "attempt" not in line
    assert line.startswith("plan: RateLimited by openai (")


def test_a_rate_limit_as_classify_makes_it_still_gets_the_remedy() -> None:
    # classify always sets a hint on RateLimited ("retry after 7s"); after the retries have run
    # out that is no advice, so the remedy must win over it.
    reply = fake.rate_limit_error("openai", retry_after=7)
    exc = classify_payload(429, reply.body["error"], headers=reply.headers, sdk="openai",
                           provider="openai", model="gpt-4o-mini")
    assert isinstance(exc, RateLimited)
    exc.attempts = 4

    line = describe("research #2", exc)

    assert "RateLimited by openai after 4 attempts (" in line
    assert line.count("HTTP 429") == 1
    assert "RESEARCHFLOW_MAX_SUBQUESTION_WORKERS" in line
    assert not line.endswith("retry after 7s")


def test_a_status_the_message_does_not_carry_is_shown() -> None:
    line = describe("plan", Transient("upstream reset", provider="openai", status=502))

    assert "(HTTP 502: upstream reset)" in line


def test_fatal_shows_its_own_hint_instead_of_the_generic_advice() -> None:
    exc = Fatal("openai HTTP 401: Incorrect API key provided", provider="openai", status=401,
                reason="auth", hint="check OPENAI_API_KEY: the key is missing, wrong or revoked")

    line = describe("plan", exc)

    assert line == ("plan: Fatal by openai (openai HTTP 401: Incorrect API key provided); "
                    "check OPENAI_API_KEY: the key is missing, wrong or revoked")
    assert "fix the configuration" not in line


def test_fatal_without_a_hint_gets_the_generic_advice() -> None:
    line = describe("report", Fatal("no API key for openai", provider="openai"))

    assert line == ("report: Fatal by openai (no API key for openai); fix the configuration "
                    "and rerun")


def test_transient_and_overflow_get_their_advice() -> None:
    transient = describe("compress #1", Transient("anthropic HTTP 500: Internal server error",
                                                  provider="anthropic", status=500,
                                                  hint="retry with backoff"))
    overflow = describe("report", ContextOverflow("prompt is too long", provider="anthropic"))

    assert transient.startswith("compress #1: Transient by anthropic (anthropic HTTP 500: ")
    assert "rerun later" in transient and "retry with backoff" not in transient
    assert "RESEARCHFLOW_CONTEXT_WINDOWS" in overflow


@pytest.mark.parametrize("scope, flag", [("topic", "RESEARCHFLOW_MAX_COST_USD"),
                                         ("batch", "RESEARCHFLOW_MAX_BATCH_COST_USD")])
def test_budget_exceeded_names_the_budget_and_no_provider(scope: str, flag: str) -> None:
    exc = budget_exceeded(scope)
    exc.provider = "openai"  # even if someone set it, a budget is ours, not the provider's

    line = describe("research #0", exc)

    assert line.startswith("research #0: BudgetExceeded (")
    assert f"{scope} budget" in line and flag in line
    assert " by " not in line and "HTTP" not in line


def test_a_plain_exception_shows_its_type_and_message() -> None:
    line = describe("store", OSError("disk full"))

    assert line == "store: OSError: disk full"


def test_a_key_in_a_plain_exception_is_masked() -> None:
    line = describe("plan", ValueError(f"could not call with key {KEY} at https://x"))

    assert KEY not in line and "Abcdefghijklmnop" not in line
    assert "sk-proj-***" in line


def test_a_long_message_is_clipped_to_one_line() -> None:
    line = describe("plan", RuntimeError("word\n" * 200))

    assert "\n" not in line
    assert len(line) < 300 and line.endswith("…")


# --- TopicFailed ------------------------------------------------------------------------------

def test_topic_failed_names_the_first_step_and_counts_the_rest() -> None:
    first = rate_limited()
    failures = [StepFailure("research #0", first),
                StepFailure("research #1", Transient("boom", provider="openai")),
                StepFailure("compress #0", Transient("boom")),
                StepFailure("compress #1", Transient("boom")),
                StepFailure("report", Transient("boom"))]

    exc = TopicFailed(failures)

    assert str(exc).startswith(describe("research #0", first))
    assert str(exc).endswith("[4 more step(s) failed: research #1, compress #0, compress #1]")
    assert exc.step == "research #0"
    assert exc.cause is first
    assert exc.budget_scope is None
    assert exc.failures == tuple(failures)


def test_topic_failed_with_one_failure_has_no_tail() -> None:
    exc = TopicFailed([StepFailure("plan", OSError("disk full"))])

    assert str(exc) == "plan: OSError: disk full"


@pytest.mark.parametrize("scope", ["topic", "batch"])
def test_topic_failed_by_a_budget_says_which(scope: str) -> None:
    exc = TopicFailed([StepFailure("research #3", budget_exceeded(scope))])

    assert exc.budget_scope == scope
    assert "budget" in str(exc)


def test_topic_failed_needs_a_failure() -> None:
    with pytest.raises(ValueError):
        TopicFailed([])
