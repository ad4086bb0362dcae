"""Rows written to the store in batches: the ledger's usage records and the call memo's answers.

A busy run makes a billed call every few milliseconds, and opening the store costs ~30-70 ms, so
rows wait `batch_seconds` and are written together. A write the store refuses (another process
holds the file, a lake is down) costs nothing but time: its rows stay first in line and the
writer tries again by itself, after a pause that doubles with each refusal up to a cap
(`Patience`), so a store locked for an hour is asked a few dozen times, not thousands.

What waits is bounded (`max_waiting`). When it is full the owner's `Patience.when_full` decides:
- "wait": the producer waits until the store takes the rows (backpressure). A usage row is a
  record of money spent, so none is ever dropped: a call that would add one more waits instead.
- "drop_oldest": the oldest rows go, with an error saying how many. A memo answer is a saving,
  not a record: losing one costs a rerun that call again, and must not stop research.

The writer says what happens, never what a row holds (only counts and the store's error): a
warning at the first refusal and then after 2, 4, 8... refusals; a warning each time the backlog
crosses a mark (1,000, 10,000, ...); an info line when it drains. `close()` (the run's end, at
exit: tasks/contexts.py) keeps trying for `at_close` seconds, then logs an error with the count
of rows it could not write.

What it does not do: know what a row is, or lock anything of its owner's. `add` never writes;
the owner calls `settle()` once it has let go of its own locks.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Literal, TypeVar

log = logging.getLogger("researchflow.batches")

T = TypeVar("T")


@dataclass(frozen=True)
class Patience:
    """How a writer bears a store that refuses its writes."""

    first_retry: float = 5.0  # seconds after the first refusal; doubles with each one after
    max_retry: float = 60.0  # the longest pause between two tries
    max_waiting: int = 50_000  # rows; a few hours of a busy run's calls
    when_full: Literal["wait", "drop_oldest"] = "wait"
    at_close: float = 30.0  # how long close() keeps trying before it gives up on what waits
    backlog_marks: tuple[int, ...] = (1_000, 10_000, 100_000)

    def pause(self, refusals: int) -> float:
        """Seconds before the next try after `refusals` refusals in a row."""
        return min(self.max_retry, self.first_retry * 2 ** max(0, min(refusals - 1, 30)))


class Backoff:
    """One store's refusals in a row, and when to ask it again: after each refusal the pause
    doubles, up to `patience.max_retry`. A refusal is worth a warning at the 1st, 2nd, 4th,
    8th... in a row, so a store that stays locked is said to be a few times an hour, neither
    once nor at every try. Shared by this writer, the memo's store (core.store.call_memo) and
    the ledger's spend reads; its owner's lock guards it."""

    def __init__(self, patience: Patience) -> None:
        self.patience = patience
        self.refusals = 0
        self.since = 0.0  # monotonic time of the first refusal in a row
        self.next_try = 0.0

    @property
    def pause(self) -> float:
        return self.patience.pause(self.refusals)

    def refused(self) -> bool:
        """Count one more refusal; whether it is worth a warning."""
        now = time.monotonic()
        if not self.refusals:
            self.since = now
        self.refusals += 1
        self.next_try = now + self.pause
        return self.refusals & (self.refusals - 1) == 0

    def pausing(self) -> bool:
        """Whether the pause after the last refusal still runs."""
        return time.monotonic() < self.next_try

    def answered(self) -> tuple[int, float]:
        """The store took a write or answered a read: how many refusals came before it and
        for how many seconds; the count starts again."""
        before = (self.refusals, time.monotonic() - self.since if self.refusals else 0.0)
        self.refusals, self.next_try = 0, 0.0
        return before


def _level(count: int, marks: tuple[int, ...]) -> int:
    """How many of the marks `count` has reached."""
    return sum(count >= mark for mark in marks)


class BatchWriter(Generic[T]):
    """Rows of one kind on their way to one sink. Safe to share between threads.

    `write(rows)` stores them all or fails: by raising, or by returning False.
    """

    def __init__(self, write: Callable[[list[T]], object], *, what: str,
                 batch_seconds: float = 0.0, patience: Patience = Patience()) -> None:
        self._write = write
        self.what = what  # for the log: "usage record", "memo answer"
        self.batch_seconds = batch_seconds
        self.patience = patience
        self._pending: list[T] = []
        self._writing: list[T] = []  # taken by a write, not yet known to be stored
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)  # told after every write, stored or not
        self._write_lock = threading.Lock()  # one write at a time, in the order rows came
        self._in_write = False
        self._refusals = Backoff(patience)
        self._level = 0  # backlog marks already reported
        self._backlogged = False  # a backlog was reported and has not drained yet
        self._full = False  # producers are held (a "wait" writer), and that was said
        self._closed = False  # no write is armed any more: the owner's last flush was made
        self.dropped = 0

    # -- what an owner calls ------------------------------------------------------------------

    def add(self, rows: Iterable[T]) -> None:
        """Queue rows (never a write); with batching, a write follows `batch_seconds` from now
        by itself. Past `max_waiting` the oldest go, for a "drop_oldest" writer."""
        with self._lock:
            self._pending.extend(rows)
            if self.patience.when_full == "drop_oldest":
                self._drop_excess()
            self._report_backlog()
            if self.batching:  # a no-op while a retry is armed: the rows go with it
                self._arm(self.batch_seconds)

    def settle(self) -> None:
        """After `add`, once the owner has let go of its own locks: without batching, write now
        (unless a refusal's pause runs: the rows wait behind the refused ones); for a full
        "wait" writer, wait until the store has taken enough."""
        if not self.batching:
            self._flush(when_due=True)
        if self.patience.when_full == "wait":
            self._wait_for_room()

    @property
    def batching(self) -> bool:
        """Whether an added row is written later by itself; else `settle` writes it."""
        return self.batch_seconds > 0 and not self._closed

    def waiting(self) -> list[T]:
        """Every row not yet known to be in the store (being written, or queued)."""
        with self._lock:
            return [*self._writing, *self._pending]

    def flush(self) -> bool:
        """Write what waits, now; whether nothing is left waiting. A refused write keeps its
        rows (first in line) and arms the next try after a longer pause."""
        return self._flush(when_due=False)

    def _flush(self, *, when_due: bool) -> bool:
        """`flush`; with `when_due` (a timer, a producer's settle) nothing is written while a
        refusal's pause runs: a timer armed in a write that then failed, or a producer that
        waited for that write, would otherwise ask the store again at once, every time."""
        with self._write_lock:
            with self._lock:
                timer, self._timer = self._timer, None
                if timer is not None:
                    timer.cancel()  # harmless when it is the timer running this
                left = self._refusals.next_try - time.monotonic()
                if when_due and not self._closed and left > 0.01:
                    self._arm(left)
                    return False
                batch, self._pending = self._pending, []
                self._writing = batch
                self._in_write = True
            if not batch:
                with self._lock:
                    self._in_write = False
                return True
            try:
                stored = self._write(batch) is not False
                error = "" if stored else "the store did not take them"
            except Exception as exc:  # noqa: BLE001 - the rows are kept and written later
                stored, error = False, str(exc)
            with self._lock:
                self._writing, self._in_write = [], False
                if stored:
                    self._stored(len(batch))
                else:
                    self._refused(batch, error)
                self._room.notify_all()
                return stored and not self._pending

    def close(self) -> bool:
        """The last writes (the run's end): what waits is tried for `at_close` seconds, and no
        timer is armed after it; whether nothing was left. What is still refused then is
        counted in an error, never dropped in silence (a later close tries it again)."""
        with self._lock:
            self._closed = True
        deadline = time.monotonic() + self.patience.at_close
        tries = 0
        while not self.flush():
            tries += 1
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(self.patience.pause(tries), left))
        if not self.waiting():
            return True
        left_over = len(self.waiting())
        log.error("%d %s(s) not written: the store refused them for the %.0f s given at close; "
                  "they are lost if the process ends now", left_over, self.what,
                  self.patience.at_close)
        return False

    # -- inside; the caller holds _lock unless said --------------------------------------------

    def _stored(self, count: int) -> None:
        refusals, seconds = self._refusals.answered()
        if refusals:
            log.info("%d %s(s) written after %d refused attempt(s) over %.0f s; %d still wait",
                     count, self.what, refusals, seconds, len(self._pending))
        # Said once the reported backlog is gone, even when its last rows fell below every
        # mark in an earlier write.
        if self._backlogged and not self._pending:
            self._backlogged = False
            log.info("backlog of %s(s) drained", self.what)
        self._report_backlog()
        if self._pending and self.batching:  # added while this write was under way
            self._arm(self.batch_seconds)

    def _refused(self, batch: list[T], error: str) -> None:
        self._pending[:0] = batch
        loud = self._refusals.refused()
        if self.patience.when_full == "drop_oldest":
            self._drop_excess()
        self._report_backlog()
        self._arm(self._refusals.pause)
        (log.warning if loud else log.debug)(
            "%d %s(s) wait to be written; the store refused %d time(s) in a row (%s); %s",
            len(self._pending), self.what, self._refusals.refusals, error,
            "closing: tried again until the close gives up" if self._closed
            else f"trying again in {self._refusals.pause:g} s")

    def _arm(self, seconds: float) -> None:
        """A write `seconds` from now, unless one is armed already (or the writer is closed:
        its owner writes what is added after that)."""
        if self._timer is None and not self._closed:
            self._timer = threading.Timer(seconds, self._flush, kwargs={"when_due": True})
            self._timer.daemon = True
            self._timer.start()

    def _report_backlog(self) -> None:
        """A warning each time what waits crosses a mark upwards; a fall below one re-arms it."""
        count = len(self._pending) + len(self._writing)
        level = _level(count, self.patience.backlog_marks)
        if level > self._level:
            self._backlogged = True
            log.warning("backlog: %d %s(s) wait for the store (past %d)%s", count, self.what,
                        self.patience.backlog_marks[level - 1],
                        f"; {self.dropped} dropped so far" if self.dropped else "")
        self._level = level

    def _drop_excess(self) -> None:
        """Drop the oldest rows past `max_waiting` (a "drop_oldest" writer)."""
        excess = len(self._pending) + len(self._writing) - self.patience.max_waiting
        excess = min(excess, len(self._pending))
        if excess <= 0:
            return
        before = self.dropped
        del self._pending[:excess]
        self.dropped += excess
        # The first drop, then each time the total crosses a backlog mark: loud, not per row.
        if not before or _level(self.dropped, self.patience.backlog_marks) > \
                _level(before, self.patience.backlog_marks):
            log.error("%d %s(s) dropped so far: the store has refused them for too long "
                      "(more than %d waited)", self.dropped, self.what,
                      self.patience.max_waiting)

    def _wait_for_room(self) -> None:
        """Hold the producer until fewer than `max_waiting` rows wait (the caller holds no
        lock). An armed retry or a write in progress makes room; with neither (the writer is
        closed) the producer writes itself, pausing as a retry would."""
        tries = 0
        while True:
            with self._lock:
                count = len(self._pending) + len(self._writing)
                if count < self.patience.max_waiting:
                    if self._full:  # said once per episode, by whichever producer sees it
                        self._full = False
                        log.info("%s(s) flow again: %d wait", self.what, count)
                    return
                if not self._full:
                    self._full = True
                    log.warning("%d %s(s) wait for the store, the most allowed: new ones wait "
                                "until it takes them", count, self.what)
                if self._timer is not None or self._in_write:
                    self._room.wait(timeout=1.0)
                    continue
            if not self.flush():
                tries += 1
                time.sleep(self.patience.pause(tries))
