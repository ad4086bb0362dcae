"""Rewriting searches that found nothing readable: the researcher's loop, the LLM role, the
offline heuristic, and the steps that carry it (DirectSteps, TaskSteps, RoutedEngine).

A search found nothing readable when it returned no results, when none of its results was
chosen, or when every page chosen from it could not be read. The researcher then asks the engine
once per sub-question for more specific searches and runs them at once as an extra round, within
the page budget and outside the round budget.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from typing import Callable, Sequence

import pytest

from core.engine.offline.extractive import ExtractiveEngine
from core.engine.model_driven.llm_engine import LLMEngine
from core.engine.model_driven.routed import RoutedEngine
from core.accounting.ledger import current_role
from core.models import Message, PageNotes, SearchResult, Source, SubQuestion, Transcript
from core.overflow.roles import rewrite_with_shrink
from core.signals import ContextOverflow
from core.researcher import DirectSteps, research_subquestion
from tests.core.test_llm_engine import QueueModel, engine_for

TODAY = date(2031, 5, 6)
SQ = SubQuestion(index=2, question="How do tokio and async-std schedule tasks?",
                 queries=("q1", "q2"))


@dataclass
class Steps:
    """`ResearchSteps` in memory: query -> urls; some urls unreadable; scripted rewrites."""

    results: dict[str, list[str]]
    unreadable: set[str] = field(default_factory=set)
    rewrites: list[list[str]] = field(default_factory=list)  # the rewrite's answers, in order
    later: list[list[str]] = field(default_factory=list)  # next_queries' answers, round by round
    pick: Callable[[list[SearchResult], int], list[int]] = (
        lambda candidates, limit: list(range(min(limit, len(candidates)))))
    searched: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    asked: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (failed, seen urls)

    def search(self, query: str, k: int) -> list[SearchResult]:
        self.searched.append(query)
        return [SearchResult(url=u, title=f"Title of {u}", snippet=f"snippet {u}", rank=i + 1)
                for i, u in enumerate(self.results.get(query, [])[:k])]

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]:
        return self.pick(candidates, limit)

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes:
        self.reads.append(hit.url)
        if hit.url in self.unreadable:
            return PageNotes(url=hit.url, reason="no readable text")
        return PageNotes(url=hit.url, notes=f"notes on {hit.url}",
                         source=Source(url=hit.url, title=hit.url, text=f"Text of {hit.url}."))

    def next_queries(self, transcript: Transcript, round_index: int, **_) -> list[str]:
        return self.later.pop(0) if self.later else []

    def rewrite(self, subquestion: SubQuestion, failed: Sequence[str],
                seen: Sequence[SearchResult]) -> list[str]:
        self.asked.append((list(failed), [r.url for r in seen]))
        return self.rewrites.pop(0) if self.rewrites else []


def _search_turns(t: Transcript) -> list[Message]:
    return [m for m in t.messages if m.role == "assistant" and m.tool_calls
            and m.tool_calls[0].name == "search"]


def _check_pairs(t: Transcript) -> None:
    """Every call answered right after its AI turn; ids unique across the transcript."""
    ids = [c.id for m in t.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids))
    pending: list[str] = []
    for m in t.messages:
        if m.role == "tool":
            assert pending and m.tool_call_id == pending.pop(0)
        else:
            assert not pending and m.role == "assistant" and m.tool_calls
            pending = [c.id for c in m.tool_calls]
    assert not pending


# -- the researcher's loop ----------------------------------------------------------------------

def test_a_search_without_results_is_rewritten_once_and_the_rewrite_is_searched() -> None:
    steps = Steps({"q1": ["a"], "q2": [], "r1": ["b"], "r2": []},
                  rewrites=[["r1", "r2"], ["never asked"]], later=[["q3"], ["q4"]])
    progress: list[str] = []
    t = research_subquestion(steps, SQ, max_rounds=3, max_pages=6, progress=progress.append)

    # q2 found nothing: one rewrite, searched at once; r2, q3 and q4 found nothing too, but a
    # sub-question is rewritten once.
    assert steps.asked == [(["q2"], [])]
    assert steps.searched == ["q1", "q2", "r1", "r2", "q3", "q4"]
    assert steps.reads == ["a", "b"]
    assert [s.url for s in t.sources] == ["a", "b"]
    # The rewrite round is extra: three rounds of next_queries still ran.
    assert len(_search_turns(t)) == 4
    turn = _search_turns(t)[1]
    assert [c.arguments["query"] for c in turn.tool_calls] == ["r1", "r2"]
    assert '"q2"' in turn.content and '"r1"' in turn.content and '"r2"' in turn.content
    assert "nothing readable" in turn.content
    assert all(m.content == "" for m in _search_turns(t) if m is not turn)
    _check_pairs(t)
    assert any("rewrite" in p and "rewritten as 2" in p for p in progress)
    assert [p.split(":")[0] for p in progress] == ["round 1", "round 1 rewrite", "round 2",
                                                   "round 3"]


def test_pages_that_all_fail_to_read_trigger_the_rewrite_with_what_they_returned() -> None:
    steps = Steps({"q1": ["a", "b"], "q2": ["b", "c"], "r1": ["d"]},
                  unreadable={"a", "b", "c"}, rewrites=[["r1"]])
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=6)

    assert steps.asked == [(["q1", "q2"], ["a", "b", "c"])]
    assert steps.reads == ["a", "b", "c", "d"]
    assert [s.url for s in t.sources] == ["d"]
    _check_pairs(t)


def test_results_none_of_which_was_chosen_trigger_the_rewrite() -> None:
    steps = Steps({"q1": ["a"], "q2": ["b"], "r1": ["c"]}, rewrites=[["r1"]],
                  pick=lambda candidates, limit: [i for i, c in enumerate(candidates)
                                                  if c.url != "b"])
    research_subquestion(steps, SQ, max_rounds=1, max_pages=6)
    assert steps.asked == [(["q2"], ["b"])]
    assert steps.reads == ["a", "c"]


def test_readable_results_ask_for_no_rewrite() -> None:
    # q2 only finds a page q1 already found and read: that is readable, not a failure.
    steps = Steps({"q1": ["a", "b"], "q2": ["a"], "q3": ["b", "c"]}, later=[["q3"]],
                  rewrites=[["r1"]])
    t = research_subquestion(steps, SQ, max_rounds=2, max_pages=6)
    assert steps.asked == []
    assert steps.searched == ["q1", "q2", "q3"]
    assert [s.url for s in t.sources] == ["a", "b", "c"]


def test_rewritten_queries_already_run_are_not_searched_again() -> None:
    steps = Steps({"q1": [], "q2": ["a"], "fresh": ["b"]},
                  rewrites=[[" Q1 ", "q2", "fresh", "FRESH", "  "]])
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=6)
    assert steps.searched == ["q1", "q2", "fresh"]
    assert t.queries_run == ["q1", "q2", "fresh"]


def test_a_rewrite_with_nothing_new_adds_no_turn() -> None:
    steps = Steps({"q1": [], "q2": ["a"]}, rewrites=[["q1"]])
    progress: list[str] = []
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=6, progress=progress.append)
    assert steps.asked == [(["q1"], [])]
    assert len(_search_turns(t)) == 1
    assert progress[-1] == "round 1: 1 queries found nothing readable; no rewrite to try"
    _check_pairs(t)


def test_max_pages_still_caps_the_reads_of_the_rewrite_round() -> None:
    steps = Steps({"q1": ["a", "b"], "q2": [], "r1": ["c", "d", "e"]}, rewrites=[["r1"]],
                  pick=lambda candidates, limit: list(range(len(candidates))))  # ignores limit
    t = research_subquestion(steps, SQ, max_rounds=3, max_pages=3)
    assert steps.reads == ["a", "b", "c"]
    assert len(t.sources) == 3


def test_no_rewrite_once_the_page_budget_is_spent() -> None:
    steps = Steps({"q1": ["a", "b"], "q2": []}, rewrites=[["r1"]])
    research_subquestion(steps, SQ, max_rounds=3, max_pages=2)
    assert steps.asked == [] and steps.searched == ["q1", "q2"]


def test_direct_steps_rewrite_as_the_queries_role() -> None:
    class Recording(ExtractiveEngine):
        roles: list[str] = []

        def rewrite_queries(self, subquestion, failed, seen, *, max_tokens=None):
            self.roles.append(current_role())
            return ["tokio scheduler"]

    class Search:
        name = "memory"

        def search(self, query: str, k: int = 5) -> list[SearchResult]:
            if query != "tokio scheduler":
                return []
            return [SearchResult(url="https://tokio.example/", title="Tokio", rank=1)]

        def read(self, result: SearchResult) -> Source | None:
            return Source(url=result.url, title="Tokio", text="Tokio schedules tasks on workers.")

    engine = Recording()
    t = research_subquestion(DirectSteps(engine, Search()), SQ, max_rounds=1)
    assert engine.roles == ["queries"]
    assert t.queries_run == ["q1", "q2", "tokio scheduler"]
    assert [s.url for s in t.sources] == ["https://tokio.example/"]


def test_the_offline_engine_rewrites_inside_the_loop() -> None:
    class Search:
        name = "memory"
        searched: list[str] = []

        def search(self, query: str, k: int = 5) -> list[SearchResult]:
            self.searched.append(query)
            return []

        def read(self, result: SearchResult) -> Source | None:
            return None

    search = Search()
    sq = SubQuestion(index=0, question="How do tokio and async-std schedule tasks?",
                     queries=("tokio async-std scheduling internals",))
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), sq, max_rounds=1)
    assert search.searched[0] == sq.queries[0]
    assert 2 <= len(search.searched) <= 4  # the failed search, then up to three rewrites
    assert len(set(search.searched)) == len(search.searched)
    _check_pairs(t)


# -- the LLM role --------------------------------------------------------------------------------

SEEN = [SearchResult(url="https://shop.example/tokio-mug", title="Tokio mug, 20% off",
                     snippet="Buy the official mug.", rank=1),
        SearchResult(url="https://forum.example/t/1", title="Login required",
                     snippet="Sign in to read this thread.", rank=2)]


def dated(model: QueueModel) -> LLMEngine:
    return engine_for(model, today=lambda: TODAY)


def test_the_prompt_carries_the_failed_queries_the_seen_titles_the_date_and_language() -> None:
    model = QueueModel(json.dumps({"queries": ["tokio work-stealing scheduler",
                                               '"async-std" executor design']}))
    sq = SQ.model_copy(update={"language": "de"})
    queries = dated(model).rewrite_queries(sq, ["tokio scheduling", "async-std tasks"], SEEN)

    assert queries == ["tokio work-stealing scheduler", '"async-std" executor design']
    system, user = model.sent[0].messages
    assert system.role == "system" and "found nothing readable" in system.content
    assert f"Today's date is {TODAY.isoformat()}." in system.content
    assert "German (de)" in system.content
    assert "Sub-question: How do tokio and async-std schedule tasks?" in user.content
    assert "- tokio scheduling\n- async-std tasks" in user.content
    for hit in SEEN:
        assert hit.title in user.content and hit.url in user.content
        assert hit.snippet in user.content
    assert model.sent[0].json_schema["properties"]["queries"]


def test_no_results_at_all_are_said_so() -> None:
    model = QueueModel(json.dumps({"queries": ["tokio scheduler"]}))
    dated(model).rewrite_queries(SQ, ["tokio scheduling"], [])
    assert "(no results at all)" in model.sent[0].messages[1].content


def test_queries_already_run_are_dropped_and_at_most_three_kept() -> None:
    model = QueueModel(json.dumps({"queries": ["  Tokio   Scheduling ", "Q1", "fresh one",
                                               "FRESH  one"]}))
    assert dated(model).rewrite_queries(SQ, ["tokio scheduling"], SEEN) == ["fresh one"]

    model = QueueModel(json.dumps({"queries": ["a", "b", "c", "d", "e"]}))
    assert dated(model).rewrite_queries(SQ, ["x"], SEEN) == ["a", "b", "c"]

    model = QueueModel(json.dumps({"queries": "one lone query"}))
    assert dated(model).rewrite_queries(SQ, ["x"], SEEN) == ["one lone query"]


def test_a_bad_answer_is_asked_again_once() -> None:
    model = QueueModel("not json", json.dumps({"queries": ["tokio scheduler"]}))
    assert dated(model).rewrite_queries(SQ, ["x"], SEEN) == ["tokio scheduler"]
    assert len(model.sent) == 2


def test_many_seen_results_are_listed_briefly() -> None:
    seen = [SearchResult(url=f"https://r{i}.example", title=f"R{i}", snippet="s" * 2_000)
            for i in range(40)]
    model = QueueModel(json.dumps({"queries": ["q"]}))
    dated(model).rewrite_queries(SQ, ["x"], seen)
    user = model.sent[0].messages[1].content
    assert "R11" in user and "R12 " not in user and "s" * 301 not in user


def test_an_overflow_is_recovered_by_the_shrink_wrapper() -> None:
    # The rewrite asks for 300 tokens (what three bounded searches need); 800 + 300 > 1,000.
    model = QueueModel(ContextOverflow("too long", limit=1_000, input_tokens=800,
                                       output_tokens=300, limit_kind="context_window_incl_output",
                                       provider="fake", model="fake-1"),
                       json.dumps({"queries": ["tokio scheduler"]}))
    engine = dated(model)
    assert rewrite_with_shrink(engine, SQ, ["x"], SEEN) == ["tokio scheduler"]
    assert len(model.sent) == 2
    assert model.sent[1].max_tokens < model.sent[0].max_tokens
    assert model.sent[1].messages == model.sent[0].messages  # the prompt is never cut


def test_routed_engine_sends_rewrites_to_the_queries_model() -> None:
    default, queries = QueueModel(model="big"), QueueModel(
        json.dumps({"queries": ["tokio scheduler"]}), model="small")
    routed = RoutedEngine(engine_for(default), {"queries": engine_for(queries)})
    assert routed.rewrite_queries(SQ, ["x"], SEEN) == ["tokio scheduler"]
    assert default.sent == [] and len(queries.sent) == 1


# -- the offline heuristic ---------------------------------------------------------------------

OFFLINE = ExtractiveEngine()


@pytest.mark.parametrize("sq", [
    SQ,
    SubQuestion(index=0, question="How do asyncio and threading differ in performance?",
                queries=("asyncio performance", "threading blocking overhead"),
                focus=("asyncio", "threading")),
    SubQuestion(index=1, question="How is garbage collection in Python used in practice?",
                queries=("garbage collection usage example",),
                focus=("garbage collection in Python",)),
])
def test_offline_rewrites_are_deterministic_new_and_few(sq: SubQuestion) -> None:
    failed = list(sq.queries[:1])
    first = OFFLINE.rewrite_queries(sq, failed, SEEN)
    assert first and len(first) <= 3
    assert first == ExtractiveEngine().rewrite_queries(sq, failed, SEEN)
    ran = {" ".join(q.lower().split()) for q in (*failed, *sq.queries)}
    assert not ran & {" ".join(q.replace('"', "").lower().split()) for q in first}
    assert len(set(first)) == len(first)


def test_offline_rewrites_build_on_the_subject() -> None:
    compare = SubQuestion(index=0, question="How do asyncio and threading differ in performance "
                          "and scalability?", queries=("asyncio performance",),
                          focus=("asyncio", "threading"))
    assert OFFLINE.rewrite_queries(compare, ["asyncio performance"], []) == [
        "asyncio vs threading", "asyncio vs threading performance",
        "asyncio vs threading scalability"]
    phrase = SubQuestion(index=0, question="How is garbage collection used in practice?",
                         queries=("garbage collection usage",), focus=("garbage collection",))
    # The phrase quoted with the aspect stands for the same words unquoted.
    assert OFFLINE.rewrite_queries(phrase, ["garbage collection usage"], []) == [
        "garbage collection", '"garbage collection" practice']


def test_offline_rewrites_skip_what_was_run_quoted_or_not() -> None:
    sq = SubQuestion(index=0, question="volcano magma", queries=("volcano magma",))
    assert OFFLINE.rewrite_queries(sq, ["volcano magma"], []) == []
    phrase = SubQuestion(index=0, question="What is garbage collection?",
                         focus=("garbage collection",))
    assert OFFLINE.rewrite_queries(phrase, ["Garbage  Collection"], []) == []


# -- the Prefect step -------------------------------------------------------------------------

def test_the_rewrite_is_its_own_cached_task() -> None:
    from tasks.caching import CACHE_POLICY
    from tasks.research import TaskSteps, rewrite_searches

    assert rewrite_searches.name == "rewrite-queries"
    assert rewrite_searches.task_run_name == "rewrite #{subquestion.number}"
    assert rewrite_searches.cache_policy == CACHE_POLICY
    assert callable(getattr(TaskSteps, "rewrite"))
