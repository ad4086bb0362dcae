"""Topic slots: how many topics of one batch research (call providers) at once.

A batch runs twice as many topic threads as slots. A topic's row takes a slot before anything
else (so the batch budget is checked when the topic can really start) and its flow gives it
back as soon as the report is written: storing the report, the artifacts and finishing the
subflow in the Prefect API then overlap with the next topic's research instead of holding its
slot. The batch's `max_concurrency` counts slots: it bounds the provider load.

A topic run on its own (no batch in this process) takes no slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_slots: dict[str, threading.BoundedSemaphore] = {}
_guard = threading.Lock()
_held = threading.local()  # the slot this thread holds; a sync subflow runs in its row's thread


@contextmanager
def batch_slots(run_id: str, slots: int) -> Iterator[None]:
    """The slots of the batch run `run_id`, for its topics while the block runs."""
    with _guard:
        _slots[run_id] = threading.BoundedSemaphore(max(1, slots))
    try:
        yield
    finally:
        with _guard:
            _slots.pop(run_id, None)


@contextmanager
def topic_slot(run_id: str) -> Iterator[None]:
    """Wait for a slot of batch `run_id` and hold it for the block, unless `release_slot` gave
    it back earlier. Without a batch of that id, nothing to wait for."""
    with _guard:
        semaphore = _slots.get(run_id)
    if semaphore is None:
        yield
        return
    semaphore.acquire()
    _held.slot = semaphore
    try:
        yield
    finally:
        release_slot()


def release_slot() -> None:
    """Give back the slot this thread holds, if any: the topic's provider calls are done."""
    semaphore = getattr(_held, "slot", None)
    if semaphore is not None:
        _held.slot = None
        semaphore.release()
