"""The roles research depth added or changed: the date and language every prompt carries,
condense by sentence numbers, choosing pages, the supervisor's review, the researcher's page
budget, and the per-topic settings that drive them (the offline engine's versions:
tests/core/test_offline_roles.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Callable, Iterator

import pytest
from pydantic import ValidationError

from core.topics.rows import read_topics_csv
from core.engine.model_driven.llm_engine import LLMEngine
from core.models import (FollowUp, Message, PageNotes, SearchResult, Source, SubQuestion, Topic,
                         TopicOptions, Transcript)
from core.researcher import research_subquestion
from core.topics.waves import gaps
from tests.core.test_llm_engine import (QueueModel, compress_reply, engine_for, make_findings,
                                        make_plan, plan_json)

TODAY = date(2030, 1, 2)
ZH_TOPIC = "线程和异步IO有什么区别"
ZH_SQ = SubQuestion(index=0, question="线程和异步IO有什么区别？", queries=("线程 异步IO",),
                    language="zh")
PAGE = Source(url="https://a.example/fox", title="Foxes",
              text="Foxes are small wild animals. The quick brown fox weighs 12 kg on average. "
                   "It runs at 50 km/h when chased. Hens lay about 300 eggs a year.")
ZH_PAGE = Source(url="https://zh.example/io", title="线程与异步IO",
                 text="线程由操作系统调度，共享进程的内存。异步IO在单个线程中运行事件循环。"
                      "全局解释器锁一次只允许一个线程执行字节码。")


def dated(model: QueueModel) -> LLMEngine:
    return engine_for(model, today=lambda: TODAY)


def framing(system: Message) -> str:
    """The last paragraph of a system prompt: the date and the language."""
    assert system.role == "system"
    return system.content.rsplit("\n\n", 1)[-1]


def assert_framed(system: Message, language: str) -> None:
    tail = framing(system)
    assert tail.startswith(f"Today's date is {TODAY.isoformat()}."), tail
    assert f"in {language}" in tail, tail


def hits(n: int) -> list[SearchResult]:
    return [SearchResult(url=f"https://r{i}.example", title=f"Result {i}", snippet=f"about {i}",
                         rank=i + 1) for i in range(n)]


# -- the date and the language of every role --------------------------------------------------

def test_a_chinese_topic_is_planned_in_chinese() -> None:
    model = QueueModel(plan_json(["线程是什么？", "异步IO是什么？", "两者有何区别？"]))
    plan = dated(model).plan(Topic(text=ZH_TOPIC))

    assert_framed(model.sent[0].messages[0], "Chinese (zh)")
    assert plan.language == "zh"
    assert {sq.language for sq in plan.subquestions} == {"zh"}


def test_the_topics_language_option_wins_over_the_topics_own_language() -> None:
    model = QueueModel(plan_json(["What are threads?", "What is async IO?", "How do they differ?"]))
    plan = dated(model).plan(Topic(text=ZH_TOPIC, language="English"))

    assert_framed(model.sent[0].messages[0], "English (en)")
    assert "Chinese" not in framing(model.sent[0].messages[0])
    assert plan.language == "en"
    assert {sq.language for sq in plan.subquestions} == {"en"}


RESEARCHER_ROLES: dict[str, tuple[str, Callable[[LLMEngine], object]]] = {
    "choose": ('{"read": [1], "why": ""}',
               lambda e: e.choose_pages(Transcript(subquestion=ZH_SQ), hits(2), 1)),
    "condense": ('{"ids": [1], "note": ""}', lambda e: e.condense(ZH_SQ, ZH_PAGE)),
    "queries": ('{"enough": true, "queries": []}',
                lambda e: e.next_queries(Transcript(subquestion=ZH_SQ), 1)),
    "compress": (compress_reply([]), lambda e: e.compress(Transcript(subquestion=ZH_SQ))),
}


@pytest.mark.parametrize("role", sorted(RESEARCHER_ROLES))
def test_the_researchers_roles_write_in_the_subquestions_language(role: str) -> None:
    reply, run = RESEARCHER_ROLES[role]
    model = QueueModel(reply)
    run(dated(model))
    assert len(model.sent) == 1
    assert_framed(model.sent[0].messages[0], "Chinese (zh)")


def test_review_and_report_write_in_the_plans_language() -> None:
    plan = make_plan().model_copy(update={"language": "zh", "report_words": 300})
    assert {sq.language for sq in plan.subquestions} == {"en"}  # the plan's language decides
    model = QueueModel('{"done": true}', "## [S1] 重量\n狐狸重12公斤 [E1]。")
    engine = dated(model)
    engine.review(plan, make_findings(), gaps(plan, make_findings()), 1, 2)
    engine.write_report(plan, make_findings())

    assert len(model.sent) == 2
    for sent in model.sent:
        assert_framed(sent.messages[0], "Chinese (zh)")


def test_the_date_is_read_for_every_call() -> None:
    days: Iterator[date] = iter([date(2030, 1, 2), date(2030, 1, 3)])
    model = QueueModel('{"ids": [], "note": ""}', '{"ids": [], "note": ""}')
    engine = engine_for(model, today=lambda: next(days))
    engine.condense(ZH_SQ, ZH_PAGE)
    engine.condense(ZH_SQ, ZH_PAGE)  # a run that crossed midnight
    assert [framing(s.messages[0])[:30] for s in model.sent] == [
        "Today's date is 2030-01-02. Wr", "Today's date is 2030-01-03. Wr"]


# -- condense: sentences picked by number, copied in code -------------------------------------

def test_condense_numbers_the_sentences_and_copies_the_picked_ones_verbatim() -> None:
    model = QueueModel(json.dumps({"ids": [2, 3], "note": "x"}))
    notes = dated(model).condense(SubQuestion(index=0, question="How heavy is a fox?"), PAGE)

    page_text = model.sent[0].messages[-1].content
    assert "[1] Foxes are small wild animals.\n[2] The quick brown fox weighs 12 kg" in page_text
    assert "[4] Hens lay about 300 eggs a year." in page_text
    note, *lines = notes.splitlines()
    assert note == "(x)"
    assert lines == ["The quick brown fox weighs 12 kg on average.",
                     "It runs at 50 km/h when chased."]
    assert all(line in PAGE.text for line in lines)


@pytest.mark.parametrize("ids, expected", [
    ([0, 4, 5, 99, -1], ["Hens lay about 300 eggs a year."]),  # 0, -1 and > 4 were never shown
    ([9], []),
    ([], []),
])
def test_condense_ignores_numbers_it_never_showed(ids: list[int], expected: list[str]) -> None:
    model = QueueModel(json.dumps({"ids": ids, "note": "a note"}))
    notes = dated(model).condense(SubQuestion(index=0, question="How many eggs?"), PAGE)
    assert notes.splitlines()[1:] == expected
    if not expected:
        assert notes == ""  # no sentence: no notes, not even the note


def test_condense_numbers_a_chinese_page_sentence_by_sentence() -> None:
    model = QueueModel('{"ids": [2], "note": ""}')
    notes = dated(model).condense(ZH_SQ, ZH_PAGE)

    page_text = model.sent[0].messages[-1].content
    assert ("[1] 线程由操作系统调度，共享进程的内存。\n[2] 异步IO在单个线程中运行事件循环。\n"
            "[3] 全局解释器锁一次只允许一个线程执行字节码。") in page_text
    assert notes == "异步IO在单个线程中运行事件循环。"


# -- choose_pages -----------------------------------------------------------------------------

def test_choose_pages_returns_positions_without_strays_or_repeats_up_to_the_limit() -> None:
    model = QueueModel(json.dumps({"read": [3, 0, 9, "3", 1, 2], "why": "specific"}))
    transcript = Transcript(subquestion=SubQuestion(index=0, question="How heavy is a fox?"))
    assert dated(model).choose_pages(transcript, hits(4), 2) == [2, 0]

    listing = model.sent[0].messages[-1].content
    assert "1. Result 0 <https://r0.example>" in listing  # numbered from 1 for the model
    assert "4. Result 3 <https://r3.example>" in listing
    assert "at most 2 result numbers" in model.sent[0].messages[0].content


@pytest.mark.parametrize("limit, candidates", [(0, 3), (2, 0)])
def test_choose_pages_with_nothing_to_choose_makes_no_call(limit: int, candidates: int) -> None:
    model = QueueModel()
    transcript = Transcript(subquestion=SubQuestion(index=0, question="How heavy is a fox?"))
    assert dated(model).choose_pages(transcript, hits(candidates), limit) == []
    assert model.sent == []


# -- review -----------------------------------------------------------------------------------

def review_reply(*followups: dict, done: bool = False) -> str:
    return json.dumps({"done": done, "followups": list(followups)})


def test_review_turns_fills_into_a_parent_and_drops_rewordings_of_asked_questions() -> None:
    plan = make_plan()  # "How heavy?" and "How fast?"
    model = QueueModel(review_reply(
        {"question": "What do foxes eat?", "queries": ["fox diet"], "why": "thin", "fills": 2},
        {"question": "  how   HEAVY? ", "queries": ["fox weight"], "fills": 1},
        {"question": "Where do hens sleep?", "queries": ["hen roost"], "fills": None},
        {"question": "what do FOXES eat?", "queries": ["fox food"]}))
    followups = dated(model).review(plan, make_findings(), gaps(plan, make_findings()), 1, 3)

    assert followups == [
        FollowUp(question="What do foxes eat?", queries=("fox diet",), why="thin", parent=1),
        FollowUp(question="Where do hens sleep?", queries=("hen roost",), parent=None)]
    prompt = model.sent[0].messages[-1].content
    assert "Sub-question 2: How fast?" in prompt and "Waves of research so far: 1" in prompt


def test_review_done_is_no_followups() -> None:
    model = QueueModel('{"done": true}')
    assert dated(model).review(make_plan(), make_findings(), [], 1, 3) == []


def test_review_is_capped_at_its_limit() -> None:
    asked = [{"question": f"Follow-up question {i}?", "fills": 1} for i in range(5)]
    model = QueueModel(review_reply(*asked))
    followups = dated(model).review(make_plan(), make_findings(), [], 2, 2)
    assert [f.question for f in followups] == ["Follow-up question 0?", "Follow-up question 1?"]
    assert "at most 2 new sub-questions" in model.sent[0].messages[0].content


def test_review_with_no_room_makes_no_call() -> None:
    model = QueueModel()
    assert dated(model).review(make_plan(), make_findings(), [], 1, 0) == []
    assert model.sent == []


# -- the researcher's loop: choose, then read within the page budget --------------------------

@dataclass
class ScriptedSteps:
    """`ResearchSteps` over fixed search results; records what it was offered and asked."""

    results: dict[str, list[str]]  # query -> urls, best first
    later: list[list[str]] = field(default_factory=list)  # next_queries' answers, round by round
    pick: Callable[[list[SearchResult], int], list[int]] = (
        lambda candidates, limit: list(range(len(candidates))))  # ignores the limit on purpose
    searched: list[str] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)
    limits: list[int] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)

    def search(self, query: str, k: int) -> list[SearchResult]:
        self.searched.append(query)
        return [SearchResult(url=u, title=u, rank=i + 1)
                for i, u in enumerate(self.results.get(query, [])[:k])]

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]:
        self.offered.append([c.url for c in candidates])
        self.limits.append(limit)
        return self.pick(candidates, limit)

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes:
        self.reads.append(hit.url)
        return PageNotes(url=hit.url, notes=f"notes on {hit.url}",
                         source=Source(url=hit.url, title=hit.url, text=f"Text of {hit.url}."))

    def next_queries(self, transcript: Transcript, round_index: int, **_) -> list[str]:
        self.asked.append(round_index)
        return self.later.pop(0) if self.later else []


SQ = SubQuestion(index=0, question="How do foxes hunt?", queries=("q1",))


def test_max_pages_caps_the_pages_read_across_rounds() -> None:
    steps = ScriptedSteps({"q1": ["a", "b"], "q2": ["c", "d", "e"]}, later=[["q2"], ["q3"]])
    transcript = research_subquestion(steps, SQ, max_rounds=5, max_pages=3)

    assert steps.reads == ["a", "b", "c"]
    assert steps.limits == [3, 1]  # what is left of the budget is what may be chosen
    assert steps.asked == [1]  # the budget is spent: no third round is planned
    assert [s.url for s in transcript.sources] == ["a", "b", "c"]


def test_a_page_passed_over_is_not_offered_again() -> None:
    steps = ScriptedSteps({"q1": ["a", "b"], "q2": ["b", "c"]}, later=[["q2"]],
                          pick=lambda candidates, limit: [0])
    research_subquestion(steps, SQ, max_rounds=3, max_pages=6)

    assert steps.offered == [["a", "b"], ["c"]]
    assert steps.reads == ["a", "c"]


def test_the_loop_stops_when_no_new_queries_come() -> None:
    steps = ScriptedSteps({"q1": ["a"], "q2": ["b"]}, later=[["q1"], ["q2"]])
    transcript = research_subquestion(steps, SQ, max_rounds=5, max_pages=6)

    assert steps.searched == ["q1"]  # round 2's only query was already run: nothing new
    assert steps.asked == [1]
    assert transcript.queries_run == ["q1"] and steps.reads == ["a"]


def test_positions_out_of_range_are_ignored() -> None:
    steps = ScriptedSteps({"q1": ["a", "b", "c"]}, pick=lambda candidates, limit: [7, -1, 1, 1])
    research_subquestion(steps, SQ, max_rounds=1, max_pages=6)
    assert steps.reads == ["b"]


# -- per-topic settings -----------------------------------------------------------------------

def test_an_unknown_language_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="unknown language 'klingon'"):
        Topic(text="How do foxes hunt?", language="klingon")


@pytest.mark.parametrize("given, code", [("Chinese", "zh"), ("zh-CN", "zh"), ("中文", "zh"),
                                         ("  ", None), (None, None)])
def test_a_topics_language_is_stored_as_its_code(given: str | None, code: str | None) -> None:
    assert Topic(text="How do foxes hunt?", language=given).language == code


def test_csv_language_and_max_waves_columns(tmp_path: Path) -> None:
    path = tmp_path / "topics.csv"
    path.write_text("topic,language,max_waves\n"
                    "How do foxes hunt?,,1\n"
                    "How do hens sleep?,xx-bad,\n"
                    "Wie jagen Füchse?,Deutsch,\n", encoding="utf-8")
    good, errors = read_topics_csv(path, batch_id="b", defaults=TopicOptions(max_waves=4))

    assert [(r.row, r.topic.text, r.topic.language, r.topic.max_waves) for r in good] == [
        (2, "How do foxes hunt?", None, 1), (4, "Wie jagen Füchse?", "de", 4)]
    assert [e.row for e in errors] == [3]
    assert "language" in errors[0].message and "xx-bad" in errors[0].message
