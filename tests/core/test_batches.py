"""core.accounting.batches: rows written together, a refused write tried again by itself, a
bounded queue, and a last write when the owner closes it."""

from __future__ import annotations

import threading
import time

from core.accounting.batches import BatchWriter


class Sink:
    """A store that refuses its first `refusals` writes (a file another process holds)."""

    def __init__(self, refusals: int = 0, *, by_false: bool = False) -> None:
        self.refusals, self.by_false = refusals, by_false
        self.writes: list[list[int]] = []
        self.tried = threading.Event()

    def __call__(self, rows: list[int]) -> bool:
        self.tried.set()
        if self.refusals:
            self.refusals -= 1
            if self.by_false:
                return False
            raise RuntimeError("Could not set lock on file")
        self.writes.append(list(rows))
        return True


def wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_rows_wait_for_their_batch_and_are_written_together() -> None:
    sink = Sink()
    writer = BatchWriter(sink, what="row", batch_seconds=0.2)
    writer.add([1])
    writer.add([2, 3])
    assert sink.writes == [] and writer.waiting() == [1, 2, 3]
    assert wait_for(lambda: sink.writes == [[1, 2, 3]])
    assert writer.waiting() == []


def test_a_refused_write_is_tried_again_by_itself() -> None:
    """Before: a failed write waited for the next row, which might never come; now the writer
    re-arms its timer after a failure."""
    for by_false in (False, True):  # a sink that raises, or says False (the memo's store)
        sink = Sink(refusals=2, by_false=by_false)
        writer = BatchWriter(sink, what="row", retry_seconds=0.05)
        writer.add([1, 2])
        assert writer.flush() is False
        assert writer.waiting() == [1, 2]  # kept, first in line
        assert wait_for(lambda: sink.writes == [[1, 2]]), "no retry came"
        assert writer.waiting() == []


def test_rows_keep_their_order_behind_a_refused_write() -> None:
    sink = Sink(refusals=1)
    writer = BatchWriter(sink, what="row", retry_seconds=60)
    writer.add([1])
    writer.flush()
    writer.add([2])
    assert writer.flush() is True
    assert sink.writes == [[1, 2]]


def test_at_most_max_waiting_rows_wait_and_the_oldest_go_first(caplog) -> None:
    sink = Sink(refusals=10)
    writer = BatchWriter(sink, what="row", retry_seconds=60, max_waiting=3)
    writer.add([1, 2])
    writer.flush()
    writer.add([3, 4, 5])
    assert writer.waiting() == [3, 4, 5]
    assert writer.dropped == 2
    assert "2 row(s) dropped" in caplog.text


def test_close_makes_a_last_write_and_arms_nothing_after_it() -> None:
    sink = Sink(refusals=1)
    writer = BatchWriter(sink, what="row", batch_seconds=3_600, retry_seconds=0.05)
    writer.add([1])
    assert writer.close() is False  # refused: kept, but no retry is armed after a close
    assert not writer.batching
    time.sleep(0.2)
    assert sink.writes == [] and writer.waiting() == [1]
    assert writer.flush() is True  # the owner writes what comes after its close itself
    assert sink.writes == [[1]]
