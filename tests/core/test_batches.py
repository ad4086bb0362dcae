"""core.accounting.batches: rows written together, a refused write tried again by itself after a
growing pause, a bounded queue (the producer waits, or the oldest go with a count), a backlog
said at each mark, and last writes, tried for a while, when the owner closes it."""

from __future__ import annotations

import threading
import time

from core.accounting.batches import BatchWriter, Patience


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
        writer = BatchWriter(sink, what="row", patience=Patience(first_retry=0.05))
        writer.add([1, 2])
        assert writer.flush() is False
        assert writer.waiting() == [1, 2]  # kept, first in line
        assert wait_for(lambda: sink.writes == [[1, 2]]), "no retry came"
        assert writer.waiting() == []


def test_rows_keep_their_order_behind_a_refused_write() -> None:
    sink = Sink(refusals=1)
    writer = BatchWriter(sink, what="row", patience=Patience(first_retry=60))
    writer.add([1])
    writer.flush()
    writer.add([2])
    assert writer.flush() is True
    assert sink.writes == [[1, 2]]


def test_a_dropping_writer_keeps_at_most_max_waiting_and_the_oldest_go_first(caplog) -> None:
    sink = Sink(refusals=10)
    writer = BatchWriter(sink, what="row", patience=Patience(
        first_retry=60, max_waiting=3, when_full="drop_oldest"))
    writer.add([1, 2])
    writer.flush()
    writer.add([3, 4, 5])
    assert writer.waiting() == [3, 4, 5]
    assert writer.dropped == 2
    assert "2 row(s) dropped so far" in caplog.text


def test_close_makes_a_last_write_and_arms_nothing_after_it() -> None:
    sink = Sink(refusals=1)
    writer = BatchWriter(sink, what="row", batch_seconds=3_600,
                         patience=Patience(first_retry=0.05, at_close=0))
    writer.add([1])
    assert writer.close() is False  # refused: kept, but no retry is armed after a close
    assert not writer.batching
    time.sleep(0.2)
    assert sink.writes == [] and writer.waiting() == [1]
    assert writer.flush() is True  # the owner writes what comes after its close itself
    assert sink.writes == [[1]]


def test_the_pause_doubles_with_each_refusal_up_to_its_cap() -> None:
    patience = Patience(first_retry=5, max_retry=60)
    assert [patience.pause(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
    assert patience.pause(10_000) == 60


def test_refusals_are_retried_with_growing_pauses_and_said_on_a_log_scale(caplog) -> None:
    """Before: one warning, then silence; now the 1st, 2nd, 4th... refusal is a warning, and the
    write that finally lands says after how many."""
    caplog.set_level("DEBUG", logger="researchflow.batches")
    sink = Sink(refusals=4)
    writer = BatchWriter(sink, what="row", patience=Patience(first_retry=0.02, max_retry=0.08))
    tries: list[float] = []
    real = sink.__call__

    def timed(rows: list[int]) -> bool:
        tries.append(time.monotonic())
        return real(rows)

    writer._write = timed  # noqa: SLF001 - the same sink, with the time of each try
    writer.add([1, 2])
    writer.settle()
    assert wait_for(lambda: sink.writes == [[1, 2]])
    gaps = [b - a for a, b in zip(tries, tries[1:])]
    assert len(gaps) == 4 and gaps[0] >= 0.02 and gaps[2] >= 0.07  # 0.02, 0.04, 0.08, 0.08
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage().split("refused ")[1][:9] for r in warnings] == [
        "1 time(s)", "2 time(s)", "4 time(s)"]
    assert "2 row(s) written after 4 refused attempt(s)" in caplog.text


def test_a_full_waiting_writer_holds_its_producer_until_the_store_takes_the_rows(caplog) -> None:
    """Usage rows are never dropped: the producer that would overfill the queue waits."""
    caplog.set_level("INFO", logger="researchflow.batches")
    sink = Sink(refusals=3)
    writer = BatchWriter(sink, what="row", patience=Patience(
        first_retry=0.05, max_retry=0.05, max_waiting=2))
    writer.add([1])
    writer.settle()  # refused: a retry is armed
    done = threading.Event()

    def produce() -> None:
        writer.add([2])
        writer.settle()  # two wait now: the most allowed
        done.set()

    threading.Thread(target=produce, daemon=True).start()
    assert done.wait(5)
    assert sink.writes == [[1, 2]] and writer.dropped == 0
    assert "wait for the store, the most allowed" in caplog.text
    assert "row(s) flow again" in caplog.text


def test_a_closed_full_writer_lets_its_producer_write_itself() -> None:
    sink = Sink(refusals=2)
    writer = BatchWriter(sink, what="row", patience=Patience(
        first_retry=0.01, max_waiting=1, at_close=0))
    writer.close()
    writer.add([1])
    writer.settle()  # no timer after a close: the producer tries, pauses, tries again
    assert sink.writes == [[1]] and writer.waiting() == []


def test_the_backlog_is_said_at_each_mark_and_when_it_drains(caplog) -> None:
    caplog.set_level("INFO", logger="researchflow.batches")
    sink = Sink(refusals=1)
    writer = BatchWriter(sink, what="row", patience=Patience(
        first_retry=60, backlog_marks=(3, 5)))
    for row in range(6):
        writer.add([row])
    backlog = [r.getMessage() for r in caplog.records if "backlog" in r.getMessage()]
    assert backlog == ["backlog: 3 row(s) wait for the store (past 3)",
                       "backlog: 5 row(s) wait for the store (past 5)"]
    writer.flush()  # refused: still 6, no new mark crossed
    assert len([r for r in caplog.records if "backlog" in r.getMessage()]) == 2
    assert writer.flush() is True
    assert "backlog of row(s) drained" in caplog.text
    for row in range(3):  # a new outage crosses the first mark again, and says so
        writer.add([row])
    assert caplog.text.count("(past 3)") == 2


def test_close_keeps_trying_for_a_while_then_counts_what_it_could_not_write(caplog) -> None:
    """At exit a locked store gets `at_close` seconds; what it still refuses is counted in an
    error, never lost in silence, and no row's content reaches the log."""
    sink = Sink(refusals=3)
    writer = BatchWriter(sink, what="row", patience=Patience(first_retry=0.02, at_close=5))
    writer.add([1111, 2222])
    assert writer.close() is True and sink.writes == [[1111, 2222]]

    sink = Sink(refusals=10**6)
    writer = BatchWriter(sink, what="row", patience=Patience(first_retry=0.02, at_close=0.2))
    writer.add([1111, 2222])
    started = time.monotonic()
    assert writer.close() is False
    assert 0.2 <= time.monotonic() - started < 2
    assert "2 row(s) not written: the store refused them for the 0 s given at close" \
        in caplog.text
    assert "1111" not in caplog.text and "2222" not in caplog.text


def test_a_row_added_while_a_retry_is_armed_waits_behind_the_refused_ones() -> None:
    """Without batching the owner's settle writes at once, but not while a retry is armed: the
    store was just refused, and order is kept."""
    sink = Sink(refusals=1)
    writer = BatchWriter(sink, what="row", patience=Patience(first_retry=0.1))
    writer.add([1])
    writer.settle()
    writer.add([2])
    writer.settle()
    assert sink.writes == [] and writer.waiting() == [1, 2]
    assert wait_for(lambda: sink.writes == [[1, 2]])


def test_rows_that_keep_coming_during_slow_refused_writes_do_not_defeat_the_pause() -> None:
    """A locked store makes each try slow (the lock wait); rows added meanwhile arm a batch
    timer, and a producer may wait for that write. Neither may ask the store again at once."""
    tries: list[float] = []

    def slow_refusal(rows: list[int]) -> bool:
        tries.append(time.monotonic())
        time.sleep(0.1)  # the lock wait
        raise RuntimeError("Could not set lock on file")

    writer = BatchWriter(slow_refusal, what="row", batch_seconds=0.01,
                         patience=Patience(first_retry=0.5, max_retry=0.5, at_close=0))
    deadline = time.monotonic() + 1.6
    while time.monotonic() < deadline:
        writer.add([1])
        writer.settle()
        time.sleep(0.005)
    gaps = [b - a for a, b in zip(tries, tries[1:])]
    writer.close()  # one last refused try, and no timer after it
    assert len(gaps) >= 1 and min(gaps) >= 0.55, gaps  # the write's 0.1 s, then the whole pause


def test_a_backlog_whose_last_rows_come_in_a_later_write_is_said_drained(caplog) -> None:
    """Rows added while a write was under way fall below every mark; the write that then
    empties the queue still says the backlog drained (the locked-store test missed it)."""
    caplog.set_level("INFO", logger="researchflow.batches")
    writer: BatchWriter

    class Late(Sink):
        def __call__(self, rows: list[int]) -> bool:
            stored = super().__call__(rows)
            if len(self.writes) == 1:
                writer._pending.extend([98, 99])  # noqa: SLF001 - arrived during this write
            return stored

    sink = Late(refusals=1)
    writer = BatchWriter(sink, what="row", patience=Patience(first_retry=60, backlog_marks=(3,)))
    for row in range(4):
        writer.add([row])
    writer.flush()  # refused
    assert writer.flush() is False  # written, but two arrived meanwhile: 2 < 3, no mark
    assert "drained" not in caplog.text
    assert writer.flush() is True
    assert "backlog of row(s) drained" in caplog.text
