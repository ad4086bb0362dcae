"""The usage ledger: who is calling (scope), for what (role), what it cost, and the budgets.

The scope (run, batch, topic, sub-question, budgets) and the role (plan, condense, ...) travel in
context variables: a flow sets the run and topic, a task adds its sub-question, the engine names
the role of each call. Prefect copies context variables into its worker threads, so a call deep
inside a task knows whose money it spends without any of it becoming a task input (which would
change cache keys).

`Ledger` keeps the running spend per (run, topic) and per run in memory, seeded from the store the
first time a key is seen (so a retried run counts what it already spent), checks budgets before a
call, and writes every `CallRecord` to the store in batches (core.accounting.batches). A store
that is locked by another process never fails a call: the records wait and are tried again with
a growing pause; only when a full queue of them waits does a new record's caller wait too.
A spend that could not be read is never taken for $0: it is asked again next time, and a call
that a cap must be checked against is refused meanwhile (`SpendUnknown`, a passing fault that
Prefect retries) rather than let through on a guess.
"""

from __future__ import annotations

import logging
import threading
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Iterator, Protocol, Sequence

from core.accounting.batches import Backoff, BatchWriter, Patience
from core.accounting.usage import CallRecord, CallRole
from core.secrets import mask
from core.signals import BudgetExceeded, Transient

log = logging.getLogger("researchflow.ledger")


@dataclass(frozen=True)
class CallScope:
    run_id: str = "local"  # the top-level run: a batch's run, or an ad-hoc topic's run
    batch_id: str = "adhoc"
    topic_id: str | None = None
    subquestion_index: int | None = None
    max_topic_cost_usd: float | None = None
    max_batch_cost_usd: float | None = None
    # The topic's edition (core.reports.editions): part of a search's call memo fingerprint
    # (core.accounting.memo), so a new edition asks the world again while a retry or rerun of this
    # one is served.
    edition: str = ""


_scope: ContextVar[CallScope] = ContextVar("researchflow_call_scope", default=CallScope())
_role: ContextVar[CallRole] = ContextVar("researchflow_call_role", default="other")


def current_scope() -> CallScope:
    return _scope.get()


def current_role() -> CallRole:
    return _role.get()


@contextmanager
def scoped(**changes: object) -> Iterator[CallScope]:
    """The current scope with `changes` applied, for the duration of the block."""
    scope = replace(_scope.get(), **changes)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


@contextmanager
def acting_as(role: CallRole) -> Iterator[None]:
    """Name the role of the provider calls made inside the block."""
    token = _role.set(role)
    try:
        yield
    finally:
        _role.reset(token)


def fallback_record(role: str, why: str) -> CallRecord:
    """The ledger's row for a role the extractive engine answered (core.engine.fallback): in the
    current scope, at no cost, with why the model's answers were refused (masked, short)."""
    scope = current_scope()
    return CallRecord(call_id=uuid.uuid4().hex, run_id=scope.run_id, batch_id=scope.batch_id,
                      topic_id=scope.topic_id, subquestion_index=scope.subquestion_index,
                      role=role, provider="offline", model="extractive",  # type: ignore[arg-type]
                      outcome="fallback", cost_usd=0.0, error=mask(why)[:500])


class SpendUnknown(Transient):
    """A budget cannot be checked: the spend so far could not be read from the store."""


Key = tuple[str, "str | None"]


def _matches(record: CallRecord, key: Key) -> bool:
    run_id, topic_id = key
    return record.run_id == run_id and (topic_id is None or record.topic_id == topic_id)


@dataclass(frozen=True)
class Reservation:
    """Projected cost held against the budgets while a call is in flight."""

    keys: tuple[tuple[str, str | None], ...]
    amount: float


class LedgerSink(Protocol):
    """Where records go (core.store.ResultStore implements it)."""

    def record_calls(self, records: Sequence[CallRecord]) -> None: ...

    def spent_usd(self, *, run_id: str, topic_id: str | None = None) -> float: ...


class Ledger:
    """Running spend, budget checks and durable records. Safe to share between threads."""

    def __init__(self, sink: LedgerSink | None = None, *, batch_seconds: float = 0.0,
                 patience: Patience = Patience(when_full="wait")) -> None:
        self.sink = sink
        # batch_seconds > 0: records wait up to this long and are written together, so a busy
        # run opens the store once per batch of calls instead of once per call. A record is
        # money spent: past `patience.max_waiting` the caller waits, no record is dropped.
        self._records: BatchWriter[CallRecord] = BatchWriter(
            sink.record_calls if sink is not None else _kept_nowhere, what="usage record",
            batch_seconds=batch_seconds, patience=patience)
        self._spent: dict[Key, float] = {}  # seeded from the store, plus what was recorded since
        self._unseeded: dict[Key, float] = {}  # recorded while the store's spend was unknown
        self._reserved: dict[Key, float] = {}
        # Failed spend reads in a row: only how loud to be. Every read is still tried, as a
        # cap can only be checked against a spend read from the store.
        self._reads = Backoff(patience)
        self._lock = threading.Lock()

    def spent(self, run_id: str, topic_id: str | None = None) -> float:
        """What the run (or one topic of it) has spent; while the store cannot be read, only
        what this process recorded (a figure for planning, never for a cap: see reserve)."""
        with self._lock:
            return self._seeded((run_id, topic_id))

    def _seeded(self, key: Key, *, required: bool = False) -> float:
        """The spend of `key`; the caller holds self._lock. The store is read the first time
        (and again after a failed read): its rows plus the records not yet written to it."""
        if key in self._spent:
            return self._spent[key]
        stored = self._stored_spend(*key)
        if stored is None:
            if required:
                raise SpendUnknown(
                    "the spend so far cannot be read from the store, so the budget cannot be "
                    "checked; no call is made until it can", provider="store",
                    hint="let go of the store (a DuckDB shell?) or raise "
                         "RESEARCHFLOW_STORE_LOCK_TIMEOUT; a rerun reuses every finished call")
            return self._unseeded.get(key, 0.0)
        waiting = sum(r.cost_usd or 0.0 for r in self._records.waiting() if _matches(r, key))
        self._unseeded.pop(key, None)
        self._spent[key] = stored + waiting
        return self._spent[key]

    def _stored_spend(self, run_id: str, topic_id: str | None) -> float | None:
        """The caller holds self._lock (which guards _reads)."""
        if self.sink is None:
            return 0.0
        try:
            spent = float(self.sink.spent_usd(run_id=run_id, topic_id=topic_id))
        except Exception as exc:  # noqa: BLE001 - a locked store must not stop research
            (log.warning if self._reads.refused() else log.debug)(
                "could not read earlier spend from the store (%d time(s) in a row: %s); "
                "asking again at the next call", self._reads.refusals, exc)
            return None
        self._reads.answered()
        return spent

    def check(self, scope: CallScope, projected: float | None, what: str) -> None:
        """Raise BudgetExceeded when spent + reserved + projected would cross the topic or
        batch budget (reserved: what calls in flight may still spend).

        `projected` is None when the call has no known price: it cannot be counted (a warning
        about the missing price has been logged) and is let through.
        """
        self.release(self.reserve(scope, projected, what))

    def reserve(self, scope: CallScope, projected: float | None, what: str) -> "Reservation":
        """`check`, and hold `projected` against the budgets until `release`: workers that
        start calls at the same moment cannot all pass a check that only one of them fits."""
        keys = ((scope.run_id, scope.topic_id), (scope.run_id, None))
        if projected is None:
            return Reservation((), 0.0)
        caps = [("topic", scope.max_topic_cost_usd, scope.topic_id),
                ("batch", scope.max_batch_cost_usd, None)]
        with self._lock:
            for kind, cap, topic_id in caps:
                if cap is None or (kind == "topic" and topic_id is None):
                    continue
                key = (scope.run_id, topic_id)
                spent = self._seeded(key, required=True)
                held = self._reserved.get(key, 0.0)
                if spent + held + projected > cap:
                    flag = "--max-cost-usd (RESEARCHFLOW_MAX_COST_USD)" if kind == "topic" \
                        else "--max-batch-cost-usd (RESEARCHFLOW_MAX_BATCH_COST_USD)"
                    raise BudgetExceeded(
                        f"{kind} budget reached: spent ${spent:.6f} of ${cap:.6f}"
                        + (f" (${held:.6f} more held by calls in flight)" if held else "")
                        + f"; the next call ({what}, up to ${projected:.6f} with its output "
                        "cap) would cross it",
                        scope=kind, spent=spent, limit=cap, projected=projected,
                        hint=f"raise {flag} to let it finish")
            unique = tuple(dict.fromkeys(keys))
            for key in unique:
                self._reserved[key] = self._reserved.get(key, 0.0) + projected
        return Reservation(unique, projected)

    def release(self, reservation: "Reservation") -> None:
        with self._lock:
            for key in reservation.keys:
                self._reserved[key] = max(0.0, self._reserved.get(key, 0.0) - reservation.amount)

    def record(self, record: CallRecord) -> None:
        cost = record.cost_usd or 0.0
        with self._lock:
            self._records.add([record])  # before seeding, which counts what waits
            # dict.fromkeys: a call outside any topic has one key, counted once.
            for key in dict.fromkeys(((record.run_id, record.topic_id), (record.run_id, None))):
                if key in self._spent:
                    self._spent[key] += cost
                elif not self._seeds(key):  # seeded now: this (waiting) record is included
                    self._unseeded[key] = self._unseeded.get(key, 0.0) + cost
        self._records.settle()  # outside our lock: it may write, or wait for room

    def _seeds(self, key: Key) -> bool:
        """Try to seed `key` from the store; whether it worked. The caller holds self._lock."""
        self._seeded(key)
        return key in self._spent

    def record_fallback(self, role: str, why: object) -> None:
        """A role the extractive engine answered for the model (core.engine.fallback's
        `on_fallback`): a row at no cost, in the current scope."""
        self.record(fallback_record(role, str(why)))

    def flush(self) -> None:
        """Write waiting records now; on a store error they wait for the next try."""
        self._records.flush()

    def close(self) -> None:
        """The last writes of what waits (the run's end), tried for a while; a record after it
        is written at once."""
        self._records.close()


def _kept_nowhere(records: list[CallRecord]) -> None:
    """A ledger without a store (tests, benches) counts spend in memory only."""
