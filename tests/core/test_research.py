"""The research loop (core/researcher.py) over real SearchBackend implementations.

`DictSearch` below is a small but real implementation of the protocol over a dict of Sources
(term-overlap search, read by URL); the last test runs the whole offline pipeline over the
DuckDB-backed CorpusSearch on a folder of md/txt/html files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.engine.offline.extractive import ExtractiveEngine
from core.models import Message, SearchResult, Source, SubQuestion, ToolCall, Topic, Transcript
from core.reports.report import assemble
from core.researcher import DirectSteps, research_subquestion
from core.search.corpus import CorpusSearch
from core.signals import Fatal, Transient


class DictSearch:
    """Search over an in-memory dict of Sources: hits share a word with the query."""

    name = "dict"

    def __init__(self, sources: list[Source], *, broken: dict[str, Exception] | None = None,
                 unreadable: set[str] = frozenset(), fail_search: Exception | None = None):
        self.sources = {s.url: s for s in sources}
        self.broken = broken or {}
        self.unreadable = unreadable
        self.fail_search = fail_search
        self.searches: list[str] = []
        self.reads: list[str] = []

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        self.searches.append(query)
        if self.fail_search is not None:
            raise self.fail_search
        words = set(re.findall(r"\w+", query.lower()))
        hits = [s for s in self.sources.values()
                if words & set(re.findall(r"\w+", s.text.lower()))]
        return [SearchResult(url=s.url, title=s.title, snippet=s.text[:40], rank=i)
                for i, s in enumerate(hits[:k], start=1)]

    def read(self, result: SearchResult) -> Source | None:
        self.reads.append(result.url)
        if result.url in self.broken:
            raise self.broken[result.url]
        if result.url in self.unreadable:
            return None
        return self.sources[result.url]


PAGES = [
    Source(url="https://a.example/loop", title="Event loop", text=(
        "The asyncio event loop runs coroutines in a single thread and switches at await.")),
    Source(url="https://b.example/threads", title="Threads", text=(
        "Threads are scheduled by the operating system and share the memory of a process.")),
    Source(url="https://c.example/gil", title="GIL", text=(
        "The global interpreter lock lets one thread run Python bytecode at a time.")),
]
SQ = SubQuestion(index=0, question="How do asyncio and threads schedule work?",
                 queries=("asyncio event loop", "threads scheduled", "interpreter lock"))


def _check_tool_rounds(messages: list[Message]) -> list[tuple[Message, list[Message]]]:
    """Every assistant turn's calls are answered, in order, by one tool result per call."""
    rounds, i = [], 0
    while i < len(messages):
        turn = messages[i]
        assert turn.role == "assistant" and turn.tool_calls, turn
        results = messages[i + 1:i + 1 + len(turn.tool_calls)]
        assert [m.role for m in results] == ["tool"] * len(turn.tool_calls)
        assert [m.tool_call_id for m in results] == [c.id for c in turn.tool_calls]
        assert [m.name for m in results] == [c.name for c in turn.tool_calls]
        rounds.append((turn, results))
        i += 1 + len(turn.tool_calls)
    ids = [c.id for turn, _ in rounds for c in turn.tool_calls]
    assert len(ids) == len(set(ids)), "tool call ids are unique"
    return rounds


def _reads(rounds: list[tuple[Message, list[Message]]]) -> list[tuple[ToolCall, Message]]:
    """The page reads: one AI turn per page, each a single read call and its result."""
    out = []
    for turn, results in rounds:
        if turn.tool_calls[0].name == "read":
            assert len(turn.tool_calls) == 1, "one page per AI turn, so shrinking drops one page"
            out.append((turn.tool_calls[0], results[0]))
    return out


def test_dict_search_answers_as_a_search_backend_does() -> None:
    """What the research loop relies on (an isinstance check against the protocol only
    compared names): ranked results, each read back into the page it names."""
    search = DictSearch(PAGES)
    hits = search.search("event loop threads", k=2)
    assert [h.rank for h in hits] == [1, 2]
    assert all(search.read(h).url == h.url for h in hits)
    assert search.search("nothing-matches-this", k=2) == []


def test_transcript_pairs_every_tool_call_with_its_result() -> None:
    search = DictSearch(PAGES)
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), SQ, max_rounds=1)
    rounds = _check_tool_rounds(t.messages)
    (search_turn, search_results) = rounds[0]
    reads = _reads(rounds[1:])
    assert len(reads) == len(rounds) - 1
    assert [c.name for c in search_turn.tool_calls] == ["search"] * 3
    assert [c.arguments["query"] for c in search_turn.tool_calls] == list(SQ.queries)
    assert "<https://a.example/loop>" in search_results[0].content
    assert {c.arguments["url"] for c, _ in reads} == {p.url for p in PAGES}
    assert all(r.content.startswith("Source: ") for _, r in reads)
    assert t.queries_run == list(SQ.queries)
    assert [s.url for s in t.sources] == [c.arguments["url"] for c, _ in reads]


def test_subquestion_without_queries_searches_its_question() -> None:
    sq = SubQuestion(index=3, question="What does the global interpreter lock do?")
    search = DictSearch(PAGES)
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), sq, max_rounds=1)
    assert search.searches == [sq.question] and t.subquestion == sq


def test_no_results_are_recorded_and_nothing_is_read() -> None:
    search = DictSearch(PAGES)
    sq = SubQuestion(index=0, question="volcano magma", queries=("volcano magma",))
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), sq, max_rounds=1)
    assert [m.role for m in t.messages] == ["assistant", "tool"]
    assert t.messages[1].content == "no results"
    assert t.sources == [] and search.reads == []


def test_pages_that_fail_to_read_are_noted_and_skipped() -> None:
    broken = {"https://b.example/threads": ValueError("HTML parser choked on page"),
              "https://c.example/gil": OSError()}
    search = DictSearch(PAGES, broken=broken, unreadable={"https://a.example/loop"})
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), SQ, max_rounds=1)
    rounds = _check_tool_rounds(t.messages)
    by_url = {c.arguments["url"]: r.content for c, r in _reads(rounds)}
    assert by_url["https://b.example/threads"] == (
        "[not read: https://b.example/threads: HTML parser choked on page]")
    assert by_url["https://c.example/gil"] == "[not read: https://c.example/gil: OSError]"
    assert by_url["https://a.example/loop"] == (
        "[not read: https://a.example/loop: no readable text]")
    assert t.sources == []


def test_one_bad_page_does_not_stop_the_others() -> None:
    search = DictSearch(PAGES, broken={"https://b.example/threads": RuntimeError("boom")})
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), SQ, max_rounds=1)
    assert {s.url for s in t.sources} == {"https://a.example/loop", "https://c.example/gil"}


@pytest.mark.parametrize("signal", [Fatal("search API key rejected", reason="auth"),
                                    Transient("search service timed out")])
def test_signals_from_search_propagate(signal: Exception) -> None:
    search = DictSearch(PAGES, fail_search=signal)
    with pytest.raises(type(signal)) as info:
        research_subquestion(DirectSteps(ExtractiveEngine(), search), SQ, max_rounds=2)
    assert info.value is signal


def test_signals_from_read_propagate_rather_than_being_skipped() -> None:
    fatal = Fatal("fetcher misconfigured", reason="config")
    search = DictSearch(PAGES, broken={"https://a.example/loop": fatal})
    with pytest.raises(Fatal):
        research_subquestion(DirectSteps(ExtractiveEngine(), search), SQ, max_rounds=1)


class EndlessEngine(ExtractiveEngine):
    """Always wants another round, with a new query each time."""

    def next_queries(self, transcript: Transcript, round_index: int, **_) -> list[str]:
        return [f"thread round {round_index}"]


@pytest.mark.parametrize("max_rounds", [1, 2, 4])
def test_max_rounds_bounds_the_rounds(max_rounds: int) -> None:
    search = DictSearch(PAGES)
    progress: list[str] = []
    t = research_subquestion(DirectSteps(EndlessEngine(), search), SQ, max_rounds=max_rounds,
                             progress=progress.append)
    search_turns = [m for m in t.messages
                    if m.role == "assistant" and m.tool_calls[0].name == "search"]
    assert len(search_turns) == max_rounds
    assert len(progress) == max_rounds and progress[0].startswith("round 1:")
    assert t.queries_run == list(SQ.queries) + [f"thread round {i}" for i in range(1, max_rounds)]
    _check_tool_rounds(t.messages)


def test_rounds_stop_when_the_engine_has_no_new_queries() -> None:
    class RepeatingEngine(ExtractiveEngine):
        def next_queries(self, transcript: Transcript, round_index: int, **_) -> list[str]:
            return list(SQ.queries)  # already run: nothing new to ask

    search = DictSearch(PAGES)
    t = research_subquestion(DirectSteps(RepeatingEngine(), search), SQ, max_rounds=5)
    assert search.searches == list(SQ.queries)
    rounds = _check_tool_rounds(t.messages)
    assert [turn.tool_calls[0].name for turn, _ in rounds] == ["search"] + ["read"] * 3


def test_duplicate_urls_are_read_once_within_and_across_rounds() -> None:
    search = DictSearch(PAGES)
    t = research_subquestion(DirectSteps(EndlessEngine(), search), SQ, max_rounds=3)
    assert sorted(search.reads) == sorted(p.url for p in PAGES)  # each page read exactly once
    assert len(t.sources) == 3
    rounds = _check_tool_rounds(t.messages)
    names = [turn.tool_calls[0].name for turn, _ in rounds]
    assert names == ["search", "read", "read", "read", "search", "search"]


def test_engine_research_with_extractive_follow_up_queries() -> None:
    engine = ExtractiveEngine()
    sq = SubQuestion(index=1, question="How does the event loop interact with bytecode?",
                     queries=("event loop",))
    search = DictSearch(PAGES)
    t = research_subquestion(DirectSteps(engine, search), sq, max_rounds=3)
    # Round 1 found the loop page; "bytecode" was uncovered, so round 2 asked for it.
    assert t.queries_run[0] == "event loop"
    assert any("bytecode" in q for q in t.queries_run[1:])
    assert "https://c.example/gil" in {s.url for s in t.sources}


# -- end to end over the real corpus backend ----------------------------------------------------

CORPUS = {
    "asyncio.md": """# asyncio overview

Asyncio runs coroutines on an event loop in a single thread, switching between tasks at each
await expression. Because asyncio tasks switch cooperatively, a blocking call inside a coroutine
stalls every other task on the loop. Asyncio suits I/O-bound programs that hold thousands of
open sockets, since each waiting task costs little memory.

```python
async def main():
    await asyncio.sleep(1)
```
""",
    "threading.txt": """Threading in Python

The threading module runs several threads in one process, sharing its memory. In CPython the
global interpreter lock lets only one thread execute bytecode at a time, so threading speeds up
I/O-bound work but not CPU-bound work. Threads are preempted by the operating system, so shared
data must be protected with a lock to stay correct.
""",
    "multiprocessing.html": """<!doctype html><html><head><title>Multiprocessing guide</title>
</head><body><nav><a href="/">Home</a> <a href="/docs">Docs</a></nav><article>
<h1>Multiprocessing</h1>
<p>The multiprocessing package starts separate processes, each with its own interpreter and
memory, so multiprocessing side-steps the global interpreter lock for CPU-bound work.</p>
<p>Starting processes and pickling the data sent between them makes multiprocessing slower to
start than threading for small I/O-bound jobs.</p>
<p>Multiprocessing shares data through queues and pipes, which copy objects between processes,
so a failure in one worker process does not corrupt the memory of the others.</p>
</article><footer>Copyright 2024 Example Docs. All rights reserved.</footer></body></html>""",
}


def test_offline_pipeline_over_corpus_quotes_sources_verbatim(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in CORPUS.items():
        (root / name).write_text(text, encoding="utf-8")
    search = CorpusSearch(root, tmp_path / "index.duckdb")
    engine = ExtractiveEngine()
    try:
        plan = engine.plan(Topic(text="Compare threading, multiprocessing and asyncio for "
                                      "concurrent I/O in Python", max_subquestions=3, max_rounds=2))
        transcripts = [research_subquestion(DirectSteps(engine, search), sq, max_rounds=2)
                       for sq in plan.subquestions]
        findings = [engine.compress(t) for t in transcripts]
        draft = engine.write_report(plan, findings)
        report = assemble(plan, findings, draft, report_id="r_e2e", engine=engine.name,
                          notice=engine.notice)
    finally:
        search.close()

    read = {s.url: s for t in transcripts for s in t.sources}
    assert {Path(url.split("#")[0]).name for url in read} == set(CORPUS)
    for t in transcripts:
        _check_tool_rounds(t.messages)
    evidence = [ev for f in findings for c in f.claims for ev in c.evidence]
    assert evidence, "the corpus answers the comparison"
    for ev in evidence:
        assert ev.quote in read[ev.url].text
    assert report.citations
    for c in report.citations:
        assert c.quote in read[c.url].text  # verbatim in what was read
        assert "Copyright" not in c.quote and "await asyncio.sleep" not in c.quote
        assert not c.quote.startswith(("Multiprocessing\n", "Threading in Python"))  # titles
    assert engine.notice in report.markdown
    for sq in plan.subquestions:
        assert f"## {sq.question}" in report.markdown
    assert "| Dimension | threading | multiprocessing | asyncio |" in report.markdown


def test_two_hits_on_one_document_are_read_as_one_source() -> None:
    class PassageSearch(DictSearch):
        """Like a corpus: hits are passages (#p0, #p1) of documents read whole."""

        def search(self, query: str, k: int = 5) -> list[SearchResult]:
            self.searches.append(query)
            return [SearchResult(url=f"{PAGES[0].url}#p{i}", title=PAGES[0].title, rank=i + 1)
                    for i in range(2)]

        def read(self, result: SearchResult) -> Source | None:
            self.reads.append(result.url)
            return PAGES[0]

    search = PassageSearch(PAGES)
    t = research_subquestion(DirectSteps(ExtractiveEngine(), search), SQ, max_rounds=1)
    assert [s.url for s in t.sources] == [PAGES[0].url]
    assert search.reads == [f"{PAGES[0].url}#p0"]  # the second passage is not fetched again
