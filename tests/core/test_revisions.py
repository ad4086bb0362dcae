"""What a step's lines changed by since it was last asked (core.engine.model_driven.revisions)."""

from __future__ import annotations

from pydantic import SecretStr

from core.accounting.memo import CallMemo
from core.engine.model_driven.revisions import (MAX_DEPTH, Revisions, Seen, delta,
                                                figures_named, line_hash, shape_hash)
from core.llm.openai import OpenAIChat

LINES = [f"Example {i} waits for {i * 7} milliseconds before it resumes." for i in range(20)]


def seen(lines: list[str], depth: int = 0, named: frozenset[str] = frozenset()) -> Seen:
    return Seen(lines=tuple(line_hash(t) for t in lines), answer={}, depth=depth,
                shapes=tuple(shape_hash(t, named) for t in lines))


def test_an_edited_figure_is_a_figures_only_change_of_one_line() -> None:
    now = list(LINES)
    now[3] = now[3].replace("21 milliseconds", "24 milliseconds")
    change = delta(seen(LINES), now)
    assert change is not None and change.added == (3,) and change.gone == (3,)
    assert change.edited == {3: 3} and change.figures_only


def test_a_reworded_line_an_added_line_and_a_figure_the_question_names_are_not_figures() -> None:
    reworded = list(LINES)
    reworded[3] = reworded[3].replace("waits", "stalls")
    change = delta(seen(LINES), reworded)
    assert change is not None and change.edited == {3: 3} and not change.figures_only

    added = [*LINES[:5], "A new sentence with 3 figures, 4 and 5.", *LINES[5:]]
    change = delta(seen(LINES), added)
    assert change is not None and change.added == (5,) and not change.gone
    assert not change.figures_only

    # "What is new in Python 3.12?": a line whose 3.11 became 3.12 says something else to it.
    named = figures_named("What is new in Python 3.12?")
    assert named == frozenset({"3.12"})
    before = ["Python 3.11 adds exception groups.", "It also adds task groups."]
    after = ["Python 3.12 adds exception groups.", "It also adds task groups."]
    assert delta(seen(before, named=named), after, named).figures_only is False
    assert delta(seen(before), after).figures_only is True  # to another question, a value


def test_a_figure_inside_a_name_is_part_of_the_name() -> None:
    assert shape_hash("HTTP/2 multiplexes streams.") != shape_hash("HTTP/3 multiplexes streams.")
    assert shape_hash("ext4 keeps a journal.") != shape_hash("ext3 keeps a journal.")
    assert shape_hash("It took 1,200 ms.") == shape_hash("It took 900 ms.")


def test_too_many_changed_lines_a_line_of_one_or_a_long_chain_ask_in_full() -> None:
    assert delta(seen(LINES[:1]), [LINES[1]]) is None  # nothing left as it was
    rewritten = [t.replace("waits", "stalls") for t in LINES]
    assert delta(seen(LINES), rewritten) is None  # 20 of 20 lines
    five = [t.replace("waits", "stalls") if i < 5 else t for i, t in enumerate(LINES)]
    assert delta(seen(LINES), five) is not None  # a quarter
    six = [t.replace("waits", "stalls") if i < 6 else t for i, t in enumerate(LINES)]
    assert delta(seen(LINES), six) is None
    edited = list(LINES)
    edited[0] = edited[0].replace("0 milliseconds", "1 milliseconds")
    assert delta(seen(LINES, depth=MAX_DEPTH - 1), edited) is not None
    assert delta(seen(LINES, depth=MAX_DEPTH), edited) is None


def test_records_live_in_the_memo_per_lineage_and_a_refresh_or_no_memo_finds_none() -> None:
    memo = CallMemo(None, ttl_hours=24)
    book = Revisions(memo, chat())
    lineage = {"role": "condense", "question": "q", "url": "https://a.example/"}
    assert book.last(lineage) is None
    book.keep(lineage, LINES[:2], {"chosen": [line_hash(LINES[0])], "note": "n"}, depth=1)
    got = book.last(lineage)
    assert got is not None and got.lines == tuple(line_hash(t) for t in LINES[:2])
    assert got.answer["note"] == "n" and got.depth == 1 and len(got.shapes) == 2
    assert book.last({**lineage, "url": "https://b.example/"}) is None
    book.keep(lineage, LINES[:3], {"chosen": [], "note": ""})  # the newest replaces it
    assert book.last(lineage).lines == tuple(line_hash(t) for t in LINES[:3])
    memo.salt = "refresh-run"  # a --refresh run asks everything again
    assert book.last(lineage) is None
    assert Revisions(CallMemo(None, ttl_hours=0), chat()).last(lineage) is None
    # An answer given at another effort or by another server is no base for a revision.
    memo.salt = ""
    assert Revisions(memo, chat()).last(lineage) is not None
    assert Revisions(memo, chat(reasoning_effort="high")).last(lineage) is None
    assert Revisions(memo, chat(base_url="http://127.0.0.1:9/v1")).last(lineage) is None


def chat(**options) -> OpenAIChat:
    return OpenAIChat("gpt-4o-mini", api_key=SecretStr("sk-test-0123456789"), **options)
