"""core.accounting.pacing with a fake clock: the per-minute cap, pauses after a rate limit (shared
by every thread), blind pauses that double and reset, the max_pause bound, and one gate per
provider."""

from __future__ import annotations

import os
import threading

import pytest

from core.accounting.pacing import ProviderGate
from core.context import build
from core.settings import Settings, run_config
from tests.fakes.clock import FakeTime


@pytest.fixture
def t() -> FakeTime:
    return FakeTime()


def gate(t: FakeTime, calls_per_minute: int | None = None, **kw) -> ProviderGate:
    return ProviderGate(calls_per_minute, clock=t.clock, sleep=t.sleep, **kw)


# --- calls per minute -------------------------------------------------------------------------

def test_three_per_minute_lets_three_through_and_the_fourth_waits_for_the_first(t) -> None:
    g = gate(t, calls_per_minute=3)
    start = t.now

    assert g.wait() == 0.0
    t.advance(10)
    assert g.wait() == 0.0
    t.advance(10)
    assert g.wait() == 0.0
    t.advance(10)  # 30 s after the first call

    assert g.wait() == pytest.approx(30.0)  # until the first call is 60 s old, not the others
    assert t.now == pytest.approx(start + 60)
    assert g.waited == pytest.approx(30.0)


def test_the_window_slides(t) -> None:
    g = gate(t, calls_per_minute=2)
    g.wait()
    t.advance(59)
    g.wait()

    assert g.wait() == pytest.approx(1.0)  # the first leaves the window at 60 s
    assert g.wait() == pytest.approx(59.0)  # now at 60 s; the second (at 59 s) leaves at 119 s


def test_no_cap_never_waits(t) -> None:
    g = gate(t)

    assert [g.wait() for _ in range(100)] == [0.0] * 100
    assert t.sleeps == []


# --- pauses after a rate limit ------------------------------------------------------------------

def test_a_retry_after_pauses_the_next_wait(t) -> None:
    g = gate(t)

    assert g.rate_limited(2.0) == 2.0
    assert g.wait() == pytest.approx(2.0)
    assert g.wait() == 0.0  # the pause is over


def test_a_shorter_rate_limit_never_shortens_a_longer_pause(t) -> None:
    g = gate(t)
    g.rate_limited(10.0)
    g.rate_limited(1.0)

    assert g.wait() == pytest.approx(10.0)


def test_a_pause_holds_every_thread_until_it_ends(t) -> None:
    workers = 4
    arrived = threading.Barrier(workers, timeout=5)
    start = t.now

    def sleep(seconds: float) -> None:
        # Every worker must have found the gate paused before any time passes.
        t.sleeps.append(seconds)
        arrived.wait()
        with t._lock:
            t.now = max(t.now, start + seconds)

    g = ProviderGate(clock=t.clock, sleep=sleep)
    g.rate_limited(2.0)
    waited: list[float] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            waited.append(g.wait())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert not errors
    assert waited == [pytest.approx(2.0)] * workers
    assert t.sleeps == [pytest.approx(2.0)] * workers
    assert t.now == pytest.approx(start + 2.0)


def test_blind_pauses_double_up_to_a_minute_and_reset_after_a_success(t) -> None:
    g = gate(t)

    pauses = [g.rate_limited(None) for _ in range(9)]

    assert pauses == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    g.succeeded()
    assert g.rate_limited(None) == 1
    assert g.rate_limited(None) == 2


def test_a_blind_pause_is_waited_on(t) -> None:
    g = gate(t)
    g.rate_limited(None)
    g.rate_limited(None)

    assert g.wait() == pytest.approx(2.0)  # the longer of the two (1 s, then 2 s)


def test_a_retry_after_above_max_pause_is_not_applied(t) -> None:
    g = gate(t, max_pause=30.0)

    assert g.rate_limited(31.0) == 0.0
    assert g.wait() == 0.0
    assert g.rate_limited(30.0) == 30.0
    assert g.wait() == pytest.approx(30.0)


def test_a_retry_after_does_not_advance_the_blind_pause(t) -> None:
    g = gate(t)
    g.rate_limited(5.0)

    assert g.rate_limited(None) == 1


def test_pause_and_cap_together(t) -> None:
    g = gate(t, calls_per_minute=1)
    g.wait()
    g.rate_limited(5.0)

    assert g.wait() == pytest.approx(60.0)  # 5 s of pause, then 55 s for the cap


# --- one gate per provider (a run context's) --------------------------------------------------

def _context(tmp_path, **changes):
    fields = dict(model="openai-compatible:m", openai_base_url="http://127.0.0.1:9/v1",
                  context_windows={"m": 8192}, model_condense="openai-compatible:small",
                  search="searxng", searxng_url="http://127.0.0.1:9", max_calls_per_minute=10,
                  cache_dir=os.environ["RESEARCHFLOW_CACHE_DIR"], db_path=tmp_path / "s.duckdb")
    return build(run_config(Settings(_env_file=None, **(fields | changes))))


def test_a_context_holds_one_gate_per_provider_it_calls(tmp_path) -> None:
    context = _context(tmp_path)
    try:
        assert set(context.gates) == {"openai-compatible", "searxng"}
        assert all(g.calls_per_minute == 10 for g in context.gates.values())
        # Both models of the provider (the model, and condense's own) wait at one gate.
        plan, condense = (context.engine.for_role(r).model for r in ("plan", "condense"))
        assert plan.model != condense.model
        assert plan.meter.gate is condense.meter.gate is context.gates["openai-compatible"]
    finally:
        context.close()


def test_a_fresh_context_has_fresh_gates(tmp_path) -> None:
    first = _context(tmp_path)
    first.gates["searxng"].rate_limited(3.0)
    first.close()
    again = _context(tmp_path)
    try:
        assert again.gates["searxng"] is not first.gates["searxng"]
        assert again.gates["searxng"].wait() == 0.0  # nothing of the first one's pause
    finally:
        again.close()


# --- tokens per minute ----------------------------------------------------------------------------

def test_tokens_per_minute_holds_the_call_that_would_cross_it(t) -> None:
    g = gate(t, tokens_per_minute=1000)

    assert g.wait(600) == 0.0
    t.advance(20)
    assert g.wait(300) == 0.0
    assert g.wait(200) == pytest.approx(40.0)  # 1,100 > 1,000 until the first leaves the window
    assert g.wait(0) == 0.0  # a call asking nothing (a search) never waits for tokens


def test_a_call_over_a_minutes_tokens_goes_alone(t) -> None:
    g = gate(t, tokens_per_minute=1000)

    assert g.wait(5000) == 0.0
    assert g.wait(10) == pytest.approx(60.0)
