"""bench/quality.py: report parsing and measured facts, the judge on loopback, and one run of
the whole harness through the real flows (research and judge roles both on a loopback server)."""

from __future__ import annotations

import json

import pytest

from bench import quality
from bench.quality import Judge, citation_score, main, race_score
from bench.report_facts import (CitationPair, citation_pairs, measured_facts, parse_report,
                                split_sentences)
from tasks import contexts
from core.llm.registry import make_model
from core.settings import Settings
from core.store import query_readonly
from tests.fakes import providers as fake
from tests.fakes.http import ScriptedServer
from tests.fakes.judge import JudgeProvider
from tests.fakes.research_provider import ResearchProvider

REPORT = """# Threads and coroutines

> Partial report: one sub-question found nothing.

**Topic:** Threading vs asyncio [7]  
**Intent:** compare

## Summary

Threads share the memory of one process [1]. Asyncio runs coroutines on one event loop [2][3].

## Comparison

| | threading | asyncio |
|---|---|---|
| Memory | shared memory [1] | one loop [2] |

## Memory

Threads share memory inside
one process [1]. Each thread needs its own stack of 8.5 MB. The moon is made of cheese. [4]
Processes are slower to start [9].

## 等待

- 线程在等待网络时会阻塞[5]。协程更轻量。
- [insufficient evidence]

## Disputed findings

- *Which is faster?*: Threads share memory faster than coroutines [1][2]

## References

1. [Threads](file:///c/threads.md) — “Threading runs several threads inside one process, and they share the same memory.”
2. [Asyncio](file:///c/asyncio.html) — “Asyncio runs coroutines on a single-threaded event loop.”
3. [Asyncio](file:///c/asyncio.html) — “Coroutines give up control at each await.”
4. [Processes](file:///c/processes.txt) — “Starting a process costs more than starting a thread.”
5. [线程](file:///c/zh.md) — “线程在等待网络数据时会阻塞当前线程。”
"""


# --- (a) pure functions -----------------------------------------------------------------------

def test_sentences_split_on_english_and_chinese_ends_but_not_on_decimals():
    assert split_sentences("It needs 8.5 MB. Next one [1]. 线程会阻塞[2]。协程更轻量。 Tail") == [
        "It needs 8.5 MB.", "Next one [1].", "线程会阻塞[2]。", "协程更轻量。", "Tail"]
    # A citation after the full stop belongs to the sentence before it (core/reports/report.py).
    assert split_sentences("Made of cheese. [4] Slower [9].") == ["Made of cheese. [4]",
                                                                  "Slower [9]."]


def test_parse_report_reads_sections_sentences_and_references():
    parsed = parse_report(REPORT)
    assert parsed.sections == ("Summary", "Comparison", "Memory", "等待")
    assert sorted(parsed.references) == [1, 2, 3, 4, 5]
    assert parsed.references[3] == ("file:///c/asyncio.html",
                                    "Coroutines give up control at each await.")
    memory = [s.text for s in parsed.sentences if s.section == "Memory"]
    assert memory == ["Threads share memory inside one process [1].",  # wrapped line joined
                      "Each thread needs its own stack of 8.5 MB.",
                      "The moon is made of cheese. [4]", "Processes are slower to start [9]."]
    table_rows = [s for s in parsed.sentences if not s.prose and s.section == "Comparison"]
    assert [s.numbers for s in table_rows] == [(), (1, 2)]  # header row and one data row
    # The preamble (title, notice, topic line) is not part of any section.
    assert not any("[7]" in s.text or "Partial" in s.text for s in parsed.sentences)


def test_citation_pairs_pair_each_sentence_with_each_number_it_cites():
    pairs = citation_pairs(REPORT)
    by = {(p.sentence, p.number): p for p in pairs}
    assert ("Asyncio runs coroutines on one event loop.", 2) in by
    assert ("Asyncio runs coroutines on one event loop.", 3) in by
    assert by[("The moon is made of cheese.", 4)].quote.startswith("Starting a process")
    dangling = by[("Processes are slower to start.", 9)]
    assert dangling.url == "" and dangling.quote == ""
    assert by[("线程在等待网络时会阻塞。", 5)].url == "file:///c/zh.md"
    # A table row is read with its column names.
    assert by[("Memory; threading: shared memory; asyncio: one loop", 1)].quote.startswith(
        "Threading runs")
    # The disputed list is checked too; the references list and the preamble are not.
    assert ("- *Which is faster?*: Threads share memory faster than coroutines", 1) not in by
    assert ("*Which is faster?*: Threads share memory faster than coroutines", 2) in by
    assert not any(p.number == 7 for p in pairs)
    assert len(pairs) == 11  # 3 Summary, 2 table row, 3 Memory, 1 等待, 2 disputed


def test_measured_facts_count_citations_sections_urls_and_cited_prose():
    facts = measured_facts(REPORT)
    assert facts.sections == 4
    # Summary 3 marks, Comparison 2, Memory 3 ([1], [4], [9]), 等待 1; disputed not counted.
    assert facts.citations == 9 and facts.citations_per_section == pytest.approx(9 / 4)
    assert facts.distinct_urls == 4  # threads, asyncio (twice), processes, zh; [9] has none
    # Prose: 2 (Summary) + 4 (Memory) + 3 (等待: two sentences, the marker) = 9, of which 6 cite.
    assert facts.prose_sentences == 9
    assert facts.cited_share == pytest.approx(6 / 9)


def test_measured_facts_of_an_empty_report_are_missing_not_zero():
    facts = measured_facts("# Nothing\n\nNo sections here.\n")
    assert facts.sections == 0 and facts.citations_per_section is None
    assert facts.cited_share is None and facts.distinct_urls == 0


def test_race_score_scales_to_100_and_missing_stays_missing():
    judged = quality.RaceJudgement(comprehensiveness=7, depth=6.5, instruction_following=9,
                                   readability=5)
    assert race_score(judged) == {"comprehensiveness": 70.0, "depth": 65.0,
                                  "instruction_following": 90.0, "readability": 50.0,
                                  "overall": 68.75}
    assert race_score(None) is None
    with pytest.raises(ValueError):
        quality.RaceJudgement(comprehensiveness=11, depth=1, instruction_following=1,
                              readability=1)


def test_citation_score_counts_distinct_supported_quotes():
    a = CitationPair("one", 1, "u1", "q1")
    b = CitationPair("two", 1, "u1", "q1")  # same source and quote, another sentence
    c = CitationPair("three", 2, "u2", "q2")
    score = citation_score([a, b, c], [True, True, False])
    assert (score.pairs, score.judged, score.supported, score.effective) == (3, 3, 2, 1)
    assert score.accuracy == pytest.approx(2 / 3)
    assert citation_score([a], [None]).accuracy is None
    assert citation_score([a], None) is None  # the judge failed: missing, not zero


def test_the_table_shows_missing_scores_as_missing_and_the_judge_follows_the_provider():
    scored = quality.TopicScore(1, "en", "describe", "A topic", "r_1", 0.0123,
                                race=None, citations=None, facts=measured_facts(REPORT))
    failed = quality.TopicScore(2, "zh", "compare", "另一个题目", "", 0.004)
    lines = quality.table([scored, failed]).splitlines()
    assert lines[0].startswith("| # | topic | lang | intent | compr. |") and len(lines) == 4
    assert lines[2].split(" | ")[4:9] == ["—"] * 5  # judge failed: not 0
    assert "| 2.2 | 4 | 67% | 0.0123 |" in lines[2]
    assert "| no report |" in lines[3] and lines[3].endswith("| 0.0040 |")
    totals = quality.summary([scored, failed])
    assert totals["race"] is None and totals["reports"] == 1
    assert totals["cost_usd_per_report"] == pytest.approx(0.0163)  # the failure's cost included
    for provider in ("openai", "anthropic", "gemini"):
        own = Settings(_env_file=None, **{f"{provider}_api_key": "k"}).resolved_model()
        assert quality.default_judge(f"{provider}:some-model") == own
    assert quality.default_judge("openai-compatible:llama3") == "openai-compatible:llama3"


# --- (b) the judge on loopback ------------------------------------------------------------------

def _judge(server: ScriptedServer, **kw) -> Judge:
    settings = Settings(_env_file=None, openai_api_key="sk-judge-test",
                        openai_base_url=server.url + "/v1")
    return Judge(make_model("openai:gpt-5.4-mini", settings), sleep=lambda _s: None, **kw)


def test_judge_scores_race_and_citations_from_a_loopback_provider():
    fake_judge = JudgeProvider(scores=(7, 6, 8, 5))
    with ScriptedServer(default=fake_judge) as server:
        judge = _judge(server, batch_size=4)
        race = race_score(judge.race("Threading vs asyncio", REPORT))
        pairs = citation_pairs(REPORT)
        verdicts = judge.citations(pairs)
    assert race == {"comprehensiveness": 70.0, "depth": 60.0, "instruction_following": 80.0,
                    "readability": 50.0, "overall": 65.0}
    assert verdicts is not None
    unsupported = {p.sentence for p, v in zip(pairs, verdicts) if not v}
    # No shared word with its quote, and a number missing from the References.
    assert unsupported == {"The moon is made of cheese.", "Processes are slower to start."}
    score = citation_score(pairs, verdicts)
    assert (score.judged, score.supported) == (11, 9)
    assert score.accuracy == pytest.approx(9 / 11)
    assert score.effective == 4  # references 1, 2, 3 and 5
    # The dangling [9] cost no call: 10 items asked, in batches of 4.
    assert fake_judge.items_judged == 10 and fake_judge.citation_calls == 3
    assert judge.calls == 4 and judge.input_tokens > 0
    sent = server.requests[0].json()
    assert sent["messages"][0]["content"].startswith(quality.JUDGE_MARK)
    assert sent["response_format"]["type"] == "json_schema"


def test_an_invalid_judge_answer_is_asked_again_once():
    fake_judge = JudgeProvider(invalid_race=1, invalid_citations=1)
    with ScriptedServer(default=fake_judge) as server:
        judge = _judge(server)
        race = judge.race("Threading vs asyncio", REPORT)
        verdicts = judge.citations(citation_pairs(REPORT))
    assert race_score(race)["overall"] == 65.0 and fake_judge.race_calls == 2
    # 10 items in two batches of 8 and 2, the first one asked twice.
    assert verdicts is not None and fake_judge.citation_calls == 3
    assert verdicts == [p.url != "" and p.sentence != "The moon is made of cheese."
                        for p in citation_pairs(REPORT)]
    reask = server.requests[1].json()["messages"]
    assert [m["role"] for m in reask] == ["system", "user", "assistant", "user"]
    assert "not valid" in reask[-1]["content"]


def test_a_judge_that_stays_invalid_leaves_the_scores_missing():
    fake_judge = JudgeProvider(invalid_race=2, invalid_citations=2)
    with ScriptedServer(default=fake_judge) as server:
        judge = _judge(server)
        race = judge.race("Threading vs asyncio", REPORT)
        verdicts = judge.citations(citation_pairs(REPORT))
    assert race is None and race_score(race) is None
    assert verdicts is None and citation_score(citation_pairs(REPORT), verdicts) is None
    assert fake_judge.race_calls == 2 and fake_judge.citation_calls == 2  # asked twice, no more
    assert len(judge.errors) == 2


def test_the_judge_retries_a_server_error_and_gives_up_on_auth():
    fake_judge = JudgeProvider()
    with ScriptedServer(default=fake_judge) as server:
        server.push(fake.server_error("openai"))
        judge = _judge(server)
        assert race_score(judge.race("t", REPORT))["overall"] == 65.0
        assert judge.calls == 1 and not judge.errors and len(server.requests) == 2
        server.push(fake.auth_error("openai"))
        judge = _judge(server)
        assert judge.race("t", REPORT) is None  # a 401 is not retried: missing at once
        assert len(judge.errors) == 1 and len(server.requests) == 3


# --- (c) the whole harness, end to end ----------------------------------------------------------

@pytest.fixture()
def fresh_contexts():
    contexts.close()
    yield
    contexts.close()


def test_no_provider_key_exits_2_with_a_clear_message(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .env here
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                "RESEARCHFLOW_OPENAI_API_KEY", "RESEARCHFLOW_ANTHROPIC_API_KEY",
                "RESEARCHFLOW_GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["--topics", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness", "fresh_contexts")
def test_main_runs_topics_through_the_flows_and_scores_them(monkeypatch, capsys, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "threads.md").write_text(
        "# Threads\n\nThreading runs several threads inside one process, and they share the "
        "same memory. A lock protects shared data from concurrent modification.\n",
        encoding="utf-8")
    (corpus / "asyncio.md").write_text(
        "# Asyncio\n\nAsyncio runs coroutines on a single-threaded event loop. A coroutine "
        "gives up control at each await, so many waits overlap without threads.\n",
        encoding="utf-8")
    (corpus / "blocking.md").write_text(
        "# Blocking\n\nA blocking call stalls the whole event loop. Memory use of a thread "
        "includes its own stack, while a coroutine needs only a small frame.\n",
        encoding="utf-8")
    # The second topic is Chinese, on databases for a small web application: a page about it
    # (a corpus with none has no report on it, core/relevance).
    (corpus / "web-db.md").write_text(
        "# 小型 Web 应用的数据库\n\nSQLite 把整个数据库放在一个文件里，适合写入不多的小型 Web 应用。"
        "PostgreSQL 是独立的数据库服务器，多用户同时写入时更可靠。\n", encoding="utf-8")
    fake_judge = JudgeProvider(fallback=ResearchProvider("openai"))
    out_json = tmp_path / "scores.json"
    with ScriptedServer(default=fake_judge) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "dummy")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        code = main(["--topics", "2", "--model", "openai:gpt-5.4-mini", "--corpus", str(corpus),
                     "--db", str(tmp_path / "q.duckdb"), "--json", str(out_json)])
    assert code == 0
    out = capsys.readouterr().out
    assert "| # | topic | lang | intent |" in out and "RACE-like" in out
    assert "open_deep_research 43.44" in out and "94%" in out
    data = json.loads(out_json.read_text(encoding="utf-8"))
    rows = data["rows"]
    assert len(rows) == 2 and [r["lang"] for r in rows] == ["en", "zh"]
    assert data["judge_model"] == "openai:gpt-5.4-mini" and data["search"] == "corpus"
    for row in rows:
        assert row["report_id"]
        assert row["race"]["overall"] == 65.0  # the fake judge's fixed scores
        assert 0.0 <= row["citations"]["accuracy"] <= 1.0
        assert row["cost_usd"] > 0  # from the ledger
    assert fake_judge.race_calls == 2 and fake_judge.citation_calls >= 1
    # The judge's calls are not in the ledger (nor in the cost): one row per research call.
    _, n = query_readonly(tmp_path / "q.duckdb", "SELECT count(*) FROM ledger "
                                                 "WHERE outcome <> 'fallback'")
    research_calls = len(server.requests) - fake_judge.race_calls - fake_judge.citation_calls
    assert research_calls > 0 and n[0][0] == research_calls
