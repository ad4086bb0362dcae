"""core.accounting.ledger: scope and role context variables (nesting, threads), budget checks,
running spend, seeding from a real DuckDB store written by an earlier process, and records that
survive a store error until the next flush."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import uuid

import duckdb
import pytest

from core.accounting.batches import Patience
from core.accounting.ledger import (CallScope, Ledger, acting_as, current_role, current_scope,
                                    scoped)
from core.signals import BudgetExceeded
from core.store import ResultStore
from core.accounting.usage import CallRecord
from core.store.connection import release_all


def call(cost: float | None, *, run_id: str = "run-1", topic_id: str | None = "t1",
         batch_id: str = "b1", call_id: str | None = None) -> CallRecord:
    return CallRecord(call_id=call_id or uuid.uuid4().hex, run_id=run_id, batch_id=batch_id,
                      topic_id=topic_id, subquestion_index=None, role="condense",
                      provider="openai", model="gpt-4o-mini", input_tokens=10, output_tokens=5,
                      cost_usd=cost)


def rows(path) -> list[tuple]:
    release_all()  # a read-only opener must wait for this process's held connection
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT call_id, cost_usd FROM ledger ORDER BY call_id").fetchall()


# --- scope and role ---------------------------------------------------------------------------

def test_scoped_nests_and_restores() -> None:
    assert current_scope() == CallScope()
    with scoped(run_id="r", batch_id="b", topic_id="t", max_topic_cost_usd=1.0) as outer:
        assert current_scope() is outer
        with scoped(subquestion_index=2) as inner:
            assert inner == CallScope(run_id="r", batch_id="b", topic_id="t",
                                      subquestion_index=2, max_topic_cost_usd=1.0)
            assert current_scope() is inner
        assert current_scope() is outer and outer.subquestion_index is None
    assert current_scope() == CallScope()


def test_scoped_restores_after_an_exception() -> None:
    with pytest.raises(RuntimeError):
        with scoped(topic_id="t"):
            raise RuntimeError("boom")
    assert current_scope().topic_id is None


def test_scoped_rejects_an_unknown_field() -> None:
    with pytest.raises(TypeError):
        with scoped(topic="t"):
            pass
    assert current_scope() == CallScope()


def test_acting_as_nests_and_restores() -> None:
    assert current_role() == "other"
    with acting_as("plan"):
        assert current_role() == "plan"
        with acting_as("condense"):
            assert current_role() == "condense"
        assert current_role() == "plan"
    assert current_role() == "other"


def test_scope_and_role_travel_into_a_thread_through_copy_context() -> None:
    # What Prefect's ThreadPoolTaskRunner does: run the task in a copy of the caller's context.
    seen: dict[str, object] = {}

    def task() -> None:
        seen["before"] = (current_scope().topic_id, current_role())
        with scoped(subquestion_index=3):
            seen["inside"] = current_scope()

    with scoped(run_id="r", topic_id="t"), acting_as("search"):
        ctx = contextvars.copy_context()
        worker = threading.Thread(target=ctx.run, args=(task,))
        worker.start()
        worker.join()
        assert current_scope().subquestion_index is None  # the thread's change stays there

    assert seen["before"] == ("t", "search")
    assert seen["inside"] == CallScope(run_id="r", topic_id="t", subquestion_index=3)


def test_a_plain_thread_does_not_inherit_the_scope() -> None:
    seen = []
    with scoped(topic_id="t"):
        worker = threading.Thread(target=lambda: seen.append(current_scope().topic_id))
        worker.start()
        worker.join()
    assert seen == [None]  # why the flows must copy the context


# --- budget checks ----------------------------------------------------------------------------

def test_topic_cap_raises_with_its_numbers() -> None:
    ledger = Ledger()
    ledger.record(call(0.30))
    scope = CallScope(run_id="run-1", topic_id="t1", max_topic_cost_usd=0.50)

    ledger.check(scope, 0.20, "condense")  # 0.30 + 0.20 == 0.50: not over
    with pytest.raises(BudgetExceeded) as info:
        ledger.check(scope, 0.25, "condense")

    exc = info.value
    assert exc.scope == "topic"
    assert exc.spent == pytest.approx(0.30)
    assert exc.limit == 0.50 and exc.projected == 0.25
    assert "budget" in str(exc) and "RESEARCHFLOW_MAX_COST_USD" in str(exc)


def test_batch_cap_counts_every_topic_of_the_run() -> None:
    ledger = Ledger()
    ledger.record(call(0.40, topic_id="t1"))
    ledger.record(call(0.40, topic_id="t2"))
    ledger.record(call(5.00, run_id="another-run", topic_id="t1"))
    scope = CallScope(run_id="run-1", topic_id="t3", max_topic_cost_usd=1.0,
                      max_batch_cost_usd=1.0)

    with pytest.raises(BudgetExceeded) as info:
        ledger.check(scope, 0.25, "plan")

    exc = info.value
    assert exc.scope == "batch"
    assert (exc.spent, exc.limit, exc.projected) == (pytest.approx(0.80), 1.0, 0.25)
    assert "RESEARCHFLOW_MAX_BATCH_COST_USD" in str(exc)


def test_an_unpriced_call_is_let_through() -> None:
    ledger = Ledger()
    ledger.record(call(10.0))

    ledger.check(CallScope(run_id="run-1", topic_id="t1", max_topic_cost_usd=0.01,
                           max_batch_cost_usd=0.01), None, "condense")


def test_the_topic_cap_is_ignored_without_a_topic() -> None:
    ledger = Ledger()
    ledger.record(call(10.0, topic_id="t1"))

    ledger.check(CallScope(run_id="run-1", topic_id=None, max_topic_cost_usd=0.01), 1.0, "plan")
    with pytest.raises(BudgetExceeded):  # the same numbers with a topic: over
        ledger.check(CallScope(run_id="run-1", topic_id="t1", max_topic_cost_usd=0.01), 1.0,
                     "plan")


def test_no_caps_means_no_check() -> None:
    ledger = Ledger()
    ledger.record(call(1_000.0))

    ledger.check(CallScope(run_id="run-1", topic_id="t1"), 1_000.0, "report")


# --- running spend ----------------------------------------------------------------------------

def test_record_updates_the_topic_and_the_run() -> None:
    ledger = Ledger()

    ledger.record(call(0.10, topic_id="t1"))
    ledger.record(call(0.05, topic_id="t1"))
    ledger.record(call(0.20, topic_id="t2"))
    ledger.record(call(None, topic_id="t2"))  # unpriced: counts as 0

    assert ledger.spent("run-1", "t1") == pytest.approx(0.15)
    assert ledger.spent("run-1", "t2") == pytest.approx(0.20)
    assert ledger.spent("run-1") == pytest.approx(0.35)
    assert ledger.spent("run-2") == 0.0


def test_a_call_outside_any_topic_counts_once_for_the_run() -> None:
    ledger = Ledger()

    ledger.record(call(0.01, topic_id=None))

    assert ledger.spent("run-1") == pytest.approx(0.01)


def test_spend_starts_from_what_an_earlier_process_stored(tmp_path) -> None:
    path = tmp_path / "ledger.duckdb"
    earlier = Ledger(ResultStore(path))
    earlier.record(call(0.30, topic_id="t1"))
    earlier.record(call(0.20, topic_id="t2"))
    del earlier

    ledger = Ledger(ResultStore(path))  # a new process over the same file
    assert ledger.spent("run-1", "t1") == pytest.approx(0.30)

    ledger.record(call(0.05, topic_id="t1"))
    ledger.record(call(0.07, topic_id="t3"))

    assert ledger.spent("run-1", "t1") == pytest.approx(0.35)
    assert ledger.spent("run-1", "t2") == pytest.approx(0.20)
    assert ledger.spent("run-1", "t3") == pytest.approx(0.07)
    assert ledger.spent("run-1") == pytest.approx(0.62)
    assert ResultStore(path).spent_usd(run_id="run-1") == pytest.approx(0.62)
    with pytest.raises(BudgetExceeded) as info:
        ledger.check(CallScope(run_id="run-1", topic_id="t1", max_topic_cost_usd=0.40), 0.06,
                     "condense")
    assert info.value.spent == pytest.approx(0.35)


def test_a_run_seeded_only_by_its_first_record_is_not_double_counted(tmp_path) -> None:
    path = tmp_path / "ledger.duckdb"
    Ledger(ResultStore(path)).record(call(0.25, topic_id="t1"))

    ledger = Ledger(ResultStore(path))
    ledger.record(call(0.25, topic_id="t1"))  # the first thing this ledger does for the key

    assert ledger.spent("run-1", "t1") == pytest.approx(0.50)
    assert ledger.spent("run-1") == pytest.approx(0.50)
    assert len(rows(path)) == 2


# --- a store that fails ------------------------------------------------------------------------

class FlakySink:
    """A real ResultStore whose record_calls raises the first `failures` times (a locked file)."""

    def __init__(self, store: ResultStore, failures: int = 1) -> None:
        self.store = store
        self.failures = failures
        self.attempts = 0

    def record_calls(self, records) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise OSError("database is locked by another process")
        self.store.record_calls(records)

    def spent_usd(self, *, run_id: str, topic_id: str | None = None) -> float:
        return self.store.spent_usd(run_id=run_id, topic_id=topic_id)


def test_a_record_the_store_refused_is_written_by_the_next_flush(tmp_path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="researchflow.ledger")
    path = tmp_path / "ledger.duckdb"
    sink = FlakySink(ResultStore(path))
    ledger = Ledger(sink)
    first = call(0.10, call_id="first")

    ledger.record(first)  # the store raises; the call is not failed
    assert rows(path) == []
    assert ledger.spent("run-1", "t1") == pytest.approx(0.10)  # still counted for budgets
    assert any("wait to be written" in r.getMessage() for r in caplog.records)

    ledger.flush()
    ledger.flush()  # nothing left: writes nothing twice

    assert rows(path) == [("first", pytest.approx(0.10))]
    assert sink.attempts == 2


def test_waiting_records_go_out_in_order_with_the_retry(tmp_path) -> None:
    """A record made while a retry is armed waits behind the refused ones (the store was just
    refused: it is not asked again per call) and goes out with them, in order."""
    path = tmp_path / "ledger.duckdb"
    sink = FlakySink(ResultStore(path), failures=2)
    ledger = Ledger(sink, patience=Patience(first_retry=0.05))

    ledger.record(call(0.01, call_id="a"))
    ledger.record(call(0.02, call_id="b"))
    ledger.record(call(0.03, call_id="c"))
    assert sink.attempts == 1

    deadline = time.monotonic() + 5
    while sink.attempts < 3 and time.monotonic() < deadline:  # no reads meanwhile: the
        time.sleep(0.02)  # retry's thread holds the file
    ledger.flush()  # waits for that write to end; nothing is left
    assert [r[0] for r in rows(path)] == ["a", "b", "c"]
    assert sink.attempts == 3
    ledger.flush()
    assert len(rows(path)) == 3
    assert ResultStore(path).usage(run_id="run-1").calls == 3


def test_calls_in_flight_hold_their_projection_against_the_budget() -> None:
    ledger = Ledger()
    scope = CallScope(run_id="run-1", topic_id="t1", max_batch_cost_usd=1.0)
    first = ledger.reserve(scope, 0.6, "condense")  # in flight, not yet recorded
    with pytest.raises(BudgetExceeded, match="held by calls in flight"):
        ledger.reserve(scope, 0.6, "condense")  # alone it fits; beside the first it does not
    ledger.release(first)
    ledger.release(ledger.reserve(scope, 0.6, "condense"))


# --- a spend that cannot be read is never $0 ---------------------------------------------------

class UnreadableSpend:
    """A store whose spend cannot be read for its first `failures` asks (a locked file), and
    which then reports what an earlier attempt of the run spent plus what it was sent."""

    def __init__(self, earlier: float, failures: int = 1) -> None:
        self.earlier, self.failures, self.written = earlier, failures, []

    def record_calls(self, records) -> None:
        self.written.extend(records)

    def spent_usd(self, *, run_id: str, topic_id: str | None = None) -> float:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("Could not set lock on file")
        return self.earlier + sum(r.cost_usd or 0.0 for r in self.written
                                  if topic_id is None or r.topic_id == topic_id)


def test_a_failed_spend_read_refuses_a_capped_call_and_is_asked_again() -> None:
    from core.accounting.ledger import SpendUnknown

    ledger = Ledger(UnreadableSpend(earlier=0.5))
    scope = CallScope(run_id="run-1", topic_id="t1", max_topic_cost_usd=0.6)
    with pytest.raises(SpendUnknown):  # unknown spend: no call past a cap it cannot check
        ledger.check(scope, 0.2, "report")
    with pytest.raises(BudgetExceeded):  # read again: $0.50 already spent, $0.20 would cross
        ledger.check(scope, 0.2, "report")
    assert ledger.spent("run-1", "t1") == pytest.approx(0.5)


def test_a_spend_recorded_while_unknown_is_counted_once_when_the_store_answers() -> None:
    sink = UnreadableSpend(earlier=0.5, failures=2)
    ledger = Ledger(sink)
    ledger.record(call(0.1))  # the store cannot tell what came before: neither key is seeded
    assert ledger.spent("run-1", "t1") == pytest.approx(0.6)  # read now: 0.5 + the written 0.1
    ledger.record(call(0.1))
    assert ledger.spent("run-1", "t1") == pytest.approx(0.7)
    assert ledger.spent("run-1") == pytest.approx(0.7)


def test_a_run_without_caps_goes_on_when_the_spend_cannot_be_read() -> None:
    ledger = Ledger(UnreadableSpend(earlier=0.5, failures=5))
    ledger.check(CallScope(run_id="run-1", topic_id="t1"), 0.2, "plan")  # no cap: nothing to check
