"""Rows written to the store in batches: the ledger's usage records and the call memo's answers.

A busy run makes a billed call every few milliseconds, and opening the store costs ~30-70 ms, so
rows wait `batch_seconds` and are written together. A write the store refuses (another process
holds the file, a lake is down) costs nothing but time: its rows wait at the front of the queue
and the writer tries again `retry_seconds` later by itself, not only when the next row arrives.
At most `max_waiting` rows wait: past that the oldest are dropped, with an error saying how many,
so a store that never comes back cannot grow the queue without bound. `flush()` writes what
waits now; `close()` makes a last try and arms nothing more (a run's context closes its writers
when the process ends: tasks/contexts.py).

What it does not do: know what a row is, or lock anything of its owner's. `add` never writes: an
owner whose writer is not `batching` (`batch_seconds` 0, or closed) calls `flush()` itself, once
it has let go of its own locks.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Generic, Iterable, TypeVar

log = logging.getLogger("researchflow.batches")

T = TypeVar("T")
RETRY_SECONDS = 5.0  # after a failed write, the next try by itself
MAX_WAITING = 50_000  # rows; a few hours of a busy run's calls


class BatchWriter(Generic[T]):
    """Rows of one kind on their way to one sink. Safe to share between threads.

    `write(rows)` stores them all or fails: by raising, or by returning False.
    """

    def __init__(self, write: Callable[[list[T]], object], *, what: str,
                 batch_seconds: float = 0.0, retry_seconds: float = RETRY_SECONDS,
                 max_waiting: int = MAX_WAITING) -> None:
        self._write = write
        self.what = what  # for the log: "usage record", "memo answer"
        self.batch_seconds = batch_seconds
        self.retry_seconds = retry_seconds
        self.max_waiting = max_waiting
        self._pending: list[T] = []
        self._writing: list[T] = []  # taken by a write, not yet known to be stored
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write at a time, in the order rows came
        self._failures = 0  # consecutive failed writes
        self._closed = False  # no write is armed any more: the owner's last flush was made
        self.dropped = 0

    def add(self, rows: Iterable[T]) -> None:
        """Queue rows; with batching, a write follows `batch_seconds` from now by itself."""
        with self._lock:
            self._pending.extend(rows)
            self._bound()
            if self.batch_seconds > 0:
                self._arm(self.batch_seconds)

    @property
    def batching(self) -> bool:
        """Whether an added row is written later by itself; else its owner flushes."""
        return self.batch_seconds > 0 and not self._closed

    def waiting(self) -> list[T]:
        """Every row not yet known to be in the store (being written, or queued)."""
        with self._lock:
            return [*self._writing, *self._pending]

    def flush(self) -> bool:
        """Write what waits; whether nothing is left waiting. A failed write keeps its rows
        (first in line) and arms a retry."""
        with self._write_lock:
            with self._lock:
                batch, self._pending = self._pending, []
                self._writing = batch
                timer, self._timer = self._timer, None
            if timer is not None:
                timer.cancel()
            if not batch:
                return True
            try:
                stored = self._write(batch) is not False
                error = "" if stored else "the store did not take them"
            except Exception as exc:  # noqa: BLE001 - the rows are kept and written later
                stored, error = False, str(exc)
            with self._lock:
                self._writing = []
                if stored:
                    if self._failures:
                        log.info("%d %s(s) written after %d failed attempt(s)", len(batch),
                                 self.what, self._failures)
                    self._failures = 0
                    return not self._pending
                self._pending[:0] = batch
                self._bound()
                self._failures += 1
                self._arm(self.retry_seconds)
            (log.warning if self._failures == 1 else log.debug)(
                "%d %s(s) wait to be written (%s); trying again in %.0f s", len(batch),
                self.what, error, self.retry_seconds)
            return False

    def close(self) -> bool:
        """A last write of what waits, and no timer after it; whether nothing was left."""
        with self._lock:
            self._closed = True
        return self.flush()

    def _arm(self, seconds: float) -> None:
        """A write `seconds` from now, unless one is armed already (or the writer is closed:
        its owner writes what is added after that). The caller holds _lock."""
        if self._timer is None and not self._closed:
            self._timer = threading.Timer(seconds, self.flush)
            self._timer.daemon = True
            self._timer.start()

    def _bound(self) -> None:
        """Drop the oldest rows past `max_waiting`. The caller holds _lock."""
        excess = len(self._pending) - self.max_waiting
        if excess > 0:
            del self._pending[:excess]
            self.dropped += excess
            log.error("%d %s(s) dropped: the store has refused them for too long (more than "
                      "%d waited)", excess, self.what, self.max_waiting)
