"""Topic slots: a batch's topics research C at a time; bookkeeping after the report does not
hold a slot, and the batch budget is checked only once a slot is free."""

from __future__ import annotations

import threading
import time

from flows.slots import batch_slots, release_slot, topic_slot


def test_a_slot_given_back_early_lets_the_next_topic_start_before_the_first_ends() -> None:
    order: list[str] = []
    first_released = threading.Event()
    first_may_end = threading.Event()

    def first() -> None:
        with topic_slot("batch-1"):
            order.append("first researches")
            release_slot()  # its report is written
            first_released.set()
            first_may_end.wait(10)  # storing, artifacts, finishing the subflow ...
            order.append("first ends")

    def second() -> None:
        first_released.wait(10)
        with topic_slot("batch-1"):
            order.append("second researches")
        first_may_end.set()

    with batch_slots("batch-1", 1):
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert order == ["first researches", "second researches", "first ends"]


def test_slots_bound_how_many_research_at_once() -> None:
    inside, most = 0, 0
    lock = threading.Lock()

    def topic() -> None:
        nonlocal inside, most
        with topic_slot("batch-2"):
            with lock:
                inside += 1
                most = max(most, inside)
            time.sleep(0.05)
            with lock:
                inside -= 1
            release_slot()
            release_slot()  # twice is harmless: a slot is given back once

    with batch_slots("batch-2", 2):
        threads = [threading.Thread(target=topic) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert most <= 2


def test_without_a_batch_a_topic_takes_no_slot() -> None:
    with topic_slot("no-such-batch"):
        release_slot()  # nothing held, nothing to give back
