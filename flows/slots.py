"""Topic slots: how many topics of one batch research (call providers) at once.

A batch runs twice as many topic threads as slots. A topic takes its slot inside its own flow,
once the subflow exists: creating a flow run in the Prefect API (and the back-off when a busy
SQLite server answers 503) happens while the previous topics still research, so a freed slot
goes straight to a topic that is ready to plan. The batch's budget is checked when the slot is
taken, that is when the topic can really start; a topic refused there raises `TopicSkipped`.
The flow gives its slot back as soon as the report is written: storing the report, the
artifacts and finishing the subflow overlap with the next topic's research. The batch's
`max_concurrency` counts slots: it bounds the provider load.

Subflows are created one at a time (`creating_subflow` in the row, `subflow_started` in the
flow once its own first writes are done): a SQLite server answers 503 to a task-run or flow-run
creation that overlaps another write (its deferred transactions cannot upgrade), and the client
backs off 2 s, which at the start of a batch delayed the second topic's whole chain.

A topic run on its own (no batch of its root run in this process) takes no slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

_gates: dict[str, "_Gate"] = {}
_guard = threading.Lock()
_held = threading.local()  # the slot this thread holds; a sync subflow runs in its row's thread


class TopicSkipped(Exception):
    """The batch's gate refused a topic (its budget was reached before the topic started)."""


@dataclass(frozen=True)
class _Gate:
    slots: threading.BoundedSemaphore
    refusal: Callable[[], str]  # why no more topics may start; "" while they may
    creating: threading.Lock  # held from a row's call of its subflow until the flow starts
    closed: threading.Event  # set by `close_batch`: the refusal is to answer from now on


@contextmanager
def batch_slots(run_id: str, slots: int,
                refusal: Callable[[], str] = lambda: "") -> Iterator[None]:
    """The slots of the batch run `run_id`, for its topics while the block runs; `refusal` is
    asked each time a topic has a slot, and a non-empty answer skips that topic (it should
    read `batch_closed`)."""
    with _guard:
        _gates[run_id] = _Gate(threading.BoundedSemaphore(max(1, slots)), refusal,
                               threading.Lock(), threading.Event())
    try:
        yield
    finally:
        with _guard:
            _gates.pop(run_id, None)


@contextmanager
def creating_subflow(run_id: str) -> Iterator[None]:
    """Around a row's call of its topic subflow: wait until no other topic of batch `run_id`
    is being created. The flow lets go with `subflow_started`; the block's end does if the
    flow never started."""
    with _guard:
        gate = _gates.get(run_id)
    if gate is None:
        yield
        return
    gate.creating.acquire()
    _held.creating = gate.creating
    try:
        yield
    finally:
        subflow_started()


def subflow_started() -> None:
    """In a topic flow, once its flow run and first writes exist: the next topic may create
    its own."""
    lock = getattr(_held, "creating", None)
    if lock is not None:
        _held.creating = None
        lock.release()


@contextmanager
def topic_slot(run_id: str) -> Iterator[None]:
    """Wait for a slot of batch `run_id` and hold it for the block, unless `release_slot` gave
    it back earlier. Raises TopicSkipped (holding nothing) when the batch refuses the topic.
    Without a batch of that id, nothing to wait for."""
    with _guard:
        gate = _gates.get(run_id)
    if gate is None:
        yield
        return
    if not gate.slots.acquire(blocking=False):
        _say("waiting for a free topic slot of the batch (its max_concurrency)")
        gate.slots.acquire()
    _held.slot = gate.slots
    try:
        reason = gate.refusal()
        if reason:
            raise TopicSkipped(reason)
        yield
    finally:
        release_slot()


@contextmanager
def slot_released() -> Iterator[None]:
    """Give this thread's slot back for the block (the topic waits for a person, not a
    provider) and take one again after it; when the block raises, the topic is over and holds
    none. Without a slot held, nothing to do."""
    semaphore = getattr(_held, "slot", None)
    if semaphore is None:
        yield
        return
    release_slot()
    yield
    if not semaphore.acquire(blocking=False):
        _say("waiting for a free topic slot of the batch (its max_concurrency)")
        semaphore.acquire()
    _held.slot = semaphore


def close_batch(run_id: str) -> None:
    """A topic of batch `run_id` ran into the batch's budget: no later topic may start. Called
    while that topic still holds its slot, so the topic waiting for it is refused."""
    with _guard:
        gate = _gates.get(run_id)
    if gate is not None:
        gate.closed.set()


def batch_closed(run_id: str) -> bool:
    """Whether a topic of batch `run_id` ran into the batch's budget (`close_batch`)."""
    with _guard:
        gate = _gates.get(run_id)
    return gate is not None and gate.closed.is_set()


def release_slot() -> None:
    """Give back the slot this thread holds, if any: the topic's provider calls are done."""
    semaphore = getattr(_held, "slot", None)
    if semaphore is not None:
        _held.slot = None
        semaphore.release()


def _say(message: str) -> None:
    """A line in the waiting flow run's log (the UI shows it Running meanwhile)."""
    try:
        get_run_logger().info(message)
    except MissingContextError:  # outside a flow run (tests): nobody to tell
        pass
