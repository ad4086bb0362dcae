"""Topic slots: a batch's topics research C at a time; bookkeeping after the report does not
hold a slot, and the batch budget is checked only once a slot is free."""

from __future__ import annotations

import threading
import time

import pytest

from flows.slots import (TopicSkipped, batch_closed, batch_slots, close_batch, creating_subflow,
                         release_slot, slot_released, subflow_started, topic_slot)


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


def test_the_refusal_is_asked_once_a_slot_is_free_and_a_refused_topic_holds_nothing() -> None:
    spent = {"usd": 0.0}
    asked_while: list[float] = []

    def refusal() -> str:
        asked_while.append(spent["usd"])
        return "budget: reached" if spent["usd"] >= 1.0 else ""

    second_done = threading.Event()
    outcome: list[str] = []

    def second() -> None:
        try:
            with topic_slot("batch-3"):
                outcome.append("researched")
        except TopicSkipped as exc:
            outcome.append(str(exc))
        second_done.set()

    with batch_slots("batch-3", 1, refusal):
        with topic_slot("batch-3"):
            waiting = threading.Thread(target=second)
            waiting.start()
            time.sleep(0.05)
            assert not second_done.is_set()  # no slot yet: not asked, not run
            spent["usd"] = 1.0  # the first topic spends the budget
        waiting.join(10)
        assert outcome == ["budget: reached"] and asked_while == [0.0, 1.0]
        with pytest.raises(TopicSkipped):  # the refused topic gave its slot back
            with topic_slot("batch-3"):
                pass


def test_subflows_are_created_one_at_a_time_until_each_flow_starts() -> None:
    started: list[str] = []
    creating = threading.Event()

    def row(name: str, flow_starts: bool) -> None:
        with creating_subflow("batch-4"):
            creating.set()
            time.sleep(0.05)  # the API creates the flow run ...
            started.append(f"{name} created")
            if flow_starts:
                subflow_started()  # ... and the flow's first line lets the next row go
                time.sleep(0.1)  # the flow researches; the lock is no longer held
                started.append(f"{name} ends")

    with batch_slots("batch-4", 2):
        first = threading.Thread(target=row, args=("first", True))
        first.start()
        creating.wait(10)
        second = threading.Thread(target=row, args=("second", True))
        second.start()
        for t in (first, second):
            t.join(10)
        # the second was created while the first's flow ran, not after it ended
        assert started == ["first created", "second created", "first ends", "second ends"]
        broken = threading.Thread(target=row, args=("broken", False))  # creation failed
        broken.start()
        broken.join(10)
        after = threading.Thread(target=row, args=("after", True))
        after.start()
        after.join(10)
        assert not after.is_alive() and started[-2:] == ["after created", "after ends"]


def test_a_topic_that_ran_into_the_batch_budget_closes_the_gate_before_its_slot_is_free() -> None:
    outcome: list[str] = []
    waiting_started = threading.Event()

    def waiting() -> None:
        waiting_started.set()
        try:
            with topic_slot("batch-5"):
                outcome.append("researched")
        except TopicSkipped as exc:
            outcome.append(str(exc))

    refusal = lambda: "budget: reached" if batch_closed("batch-5") else ""  # noqa: E731
    with batch_slots("batch-5", 1, refusal):
        with pytest.raises(RuntimeError):
            with topic_slot("batch-5"):
                second = threading.Thread(target=waiting)
                second.start()
                waiting_started.wait(10)
                close_batch("batch-5")  # the topic's step raised BudgetExceeded (batch)
                raise RuntimeError("the topic fails")
        second.join(10)
    assert outcome == ["budget: reached"]


def test_a_topic_waiting_for_its_plan_review_lets_another_research_meanwhile() -> None:
    order: list[str] = []
    reviewing = threading.Event()
    reviewed = threading.Event()

    def waits_for_review() -> None:
        with topic_slot("batch-r"):
            order.append("first plans")
            with slot_released():
                reviewing.set()
                reviewed.wait(10)  # a person reads the plan
            order.append("first researches")  # with a slot again

    def another() -> None:
        reviewing.wait(10)
        with topic_slot("batch-r"):
            order.append("second researches")
            time.sleep(0.2)  # the first, reviewed now, waits for this slot
            reviewed.set()
            time.sleep(0.2)
            order.append("second ends")

    with batch_slots("batch-r", 1):
        threads = [threading.Thread(target=waits_for_review), threading.Thread(target=another)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert order == ["first plans", "second researches", "second ends", "first researches"]
