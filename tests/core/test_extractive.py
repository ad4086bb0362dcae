"""The offline extractive engine (core/engine/offline/extractive.py): plan, condense, compress, write.

No network, no weights: every test runs the real engine on real text, and checks the promises
the pipeline relies on: compare plans ask about dimensions of difference covering every option,
quotes are verbatim substrings of their sources, and the same inputs give the same report.
"""

from __future__ import annotations

import pydoc
import re

import pytest

from core.engine.offline.extractive import ExtractiveEngine
from core.engine.offline.words import notice_of
from core.models import (Message, ResearchPlan, SearchResult, Source, SubQuestion, Topic,
                         Transcript)
from core.reports.report import assemble, evidence_catalog
from tests.fakes.memory_search import memory_search, memory_vocabulary

COMPARE_TOPICS = {
    "Compare threading, multiprocessing and asyncio for concurrent I/O in Python":
        ("compare", ("threading", "multiprocessing", "asyncio")),
    "asyncio vs threading": ("compare", ("asyncio", "threading")),
    "Which should I use for serializing data: json or pickle?": ("recommend", ("json", "pickle")),
    "What is the difference between lists and tuples?": ("compare", ("lists", "tuples")),
    "Should I choose SQLite or PostgreSQL for a small web app?":
        ("recommend", ("SQLite", "PostgreSQL")),
}

THREADING = Source(url="https://docs.example/threading", title="threading", text=(
    "Threading\n\n"
    "The threading module runs several threads inside one process, and they share its memory. "
    "In CPython only one thread executes Python bytecode at a time because of the global "
    "interpreter lock. Threading still helps with I/O-bound work, since a thread waiting on a "
    "socket releases the lock. Threads are scheduled preemptively by the operating system, so "
    "shared data needs a lock.\n\n"
    "Read our cookie policy before continuing to use this website today."))
ASYNCIO = Source(url="https://docs.example/asyncio", title="asyncio", text=(
    "asyncio is a library to write concurrent code using the async and await syntax. "
    "Asyncio runs every coroutine on one event loop in a single thread. "
    "A coroutine gives up control only at an await, so asyncio switches tasks cooperatively. "
    "Asyncio handles thousands of sockets for I/O-bound work with little memory per task. "
    "A blocking call inside a coroutine stalls every other asyncio task on the loop.\n\n"
    "Read our cookie policy before continuing to use this website today."))
MULTI = Source(url="https://docs.example/multiprocessing", title="multiprocessing", text=(
    "The multiprocessing package spawns separate processes, each with its own interpreter and "
    "memory. Multiprocessing side-steps the global interpreter lock, so CPU-bound work runs in "
    "parallel on several cores. Starting a process and pickling its arguments costs far more "
    "than starting a thread.\n\n"
    "    pool = multiprocessing.Pool(4)\n    pool.map(work, items)\n\n"
    "Read our cookie policy before continuing to use this website today."))
SOURCES = [THREADING, ASYNCIO, MULTI]
LISTS = [Source(url=f"https://docs.example/{name}", title=name, text=text) for name, text in (
    ("lists", "Lists are mutable sequences, typically used to store collections of items. "
              "Lists may be sorted in place, and appending to lists is cheap."),
    ("tuples", "Tuples are immutable sequences, typically used to store collections of "
               "heterogeneous data. Tuples may be used as dictionary keys."),
    ("sets", "Sets are unordered collections of distinct hashable objects. Sets are mutable; "
             "frozen sets are not, so only frozen sets may be dictionary keys."),
    ("dicts", "Dicts map hashable keys to arbitrary objects and are mutable. Dicts keep the "
              "order in which keys were inserted, unlike sets."))]
SERIAL = [Source(url=f"https://docs.example/{name}", title=name, text=text) for name, text in (
    ("json", "The json module serializes Python objects to JSON text, a format other "
             "languages read. Serializing data with json is safe for untrusted input."),
    ("pickle", "The pickle module serializes Python objects to a binary format only Python "
               "reads. Unpickling untrusted data is not secure: pickle data can run code."))]
DATABASES = [Source(url=f"https://docs.example/{name}", title=name, text=text)
             for name, text in (
    ("sqlite", "SQLite is an embedded database in a single file, which suits a small web app "
               "with few concurrent writers. SQLite locks the whole database for a write."),
    ("postgresql", "PostgreSQL is a database server; a small web app gains concurrent "
                   "writers and roles from PostgreSQL. PostgreSQL uses MVCC for writes."))]
TOPIC = "Compare threading, multiprocessing and asyncio for concurrent I/O in Python"


def _transcript(sq: SubQuestion, sources: list[Source]) -> Transcript:
    engine = ExtractiveEngine()
    t = Transcript(subquestion=sq, sources=list(sources))
    for i, src in enumerate(sources):
        t.messages.append(Message(role="tool", tool_call_id=f"c{i}", name="read",
                                  content=f"Source: {src.title}\n{engine.condense(sq, src)}"))
    return t


def _engine(sources: list[Source]) -> ExtractiveEngine:
    """The engine planning over `sources` as its corpus."""
    return ExtractiveEngine(vocabulary=memory_vocabulary(sources))


def _echoes(heading: str, topic: str) -> bool:
    """A heading repeating six words of the topic in a row: a template around it."""
    words = re.findall(r"[\w'-]+", topic.lower())
    text = " " + " ".join(re.findall(r"[\w'-]+", heading.lower())) + " "
    return any(" " + " ".join(words[i:i + 6]) + " " in text for i in range(len(words) - 5))


def _run(topic: str, sources: list[Source], n: int = 4):
    engine = _engine(sources)
    plan = engine.plan(Topic(text=topic, max_subquestions=n))
    findings = [engine.compress(_transcript(sq, sources)) for sq in plan.subquestions]
    draft = engine.write_report(plan, findings)
    report = assemble(plan, findings, draft, report_id="r_x", engine=engine.name,
                      notice=engine.notice)
    return plan, findings, report


def test_engine_plays_every_role_the_pipeline_asks_of_it() -> None:
    """Each role of core.engine.base answers in its shape (an isinstance check against the
    runtime-checkable protocol only compared names, and could not fail on an answer)."""
    engine = ExtractiveEngine()
    assert engine.for_role("report").name == engine.name
    assert engine.context_window() is None  # no model: calls are not sized to a window
    assert engine.notice_for("zh") != engine.notice_for("en") == notice_of(engine, "en")
    plan = engine.plan(Topic(text=TOPIC, max_subquestions=3))
    sq = plan.subquestions[0]
    transcript = _transcript(sq, SOURCES)
    hits = [SearchResult(url=s.url, title=s.title, snippet=s.text[:80], rank=i)
            for i, s in enumerate(SOURCES, start=1)]
    assert set(engine.choose_pages(transcript, hits, 2)) <= {0, 1, 2}
    assert all(isinstance(q, str) for q in engine.next_queries(transcript, 0))
    assert sq.question not in engine.rewrite_queries(sq, [sq.question], hits)
    assert engine.condense(sq, THREADING).split("\n")[0].removeprefix("- ") in THREADING.text
    finding = engine.compress(transcript)
    assert finding.subquestion_index == sq.index and finding.support
    assert all(f.question for f in engine.review(plan, [finding], [], 1, 2))
    assert engine.write_report(plan, [finding]).sections


# -- plan -------------------------------------------------------------------------------------

@pytest.mark.parametrize("topic", sorted(COMPARE_TOPICS))
def test_a_comparison_asks_each_option_then_how_they_differ(topic: str) -> None:
    intent, targets = COMPARE_TOPICS[topic]
    plan = _engine(LISTS + SOURCES + SERIAL + DATABASES).plan(Topic(text=topic,
                                                                    max_subquestions=4))
    assert (plan.intent, plan.targets) == (intent, targets)
    assert [sq.index for sq in plan.subquestions] == list(range(len(plan.subquestions)))
    options = [sq for sq in plan.subquestions if len(sq.focus) == 1]
    assert [sq.focus for sq in options] == [(t,) for t in targets]  # a quote names its option
    for sq, option in zip(options, targets):
        assert sq.question.startswith(option) and sq.queries[0].startswith(option)
    if len(targets) < 4:  # and, room left, one on how they differ, about them all
        differ = plan.subquestions[len(targets)]
        assert differ.focus == targets and "differ" in differ.question
    assert len({sq.question for sq in plan.subquestions}) == len(plan.subquestions)


def test_an_option_the_corpus_never_names_is_a_part_nobody_can_answer() -> None:
    plan = _engine(SOURCES).plan(Topic(text="Compare asyncio and trio for concurrent I/O"))
    assert plan.targets == ("asyncio", "trio")
    assert [(p.kind, p.absent) for p in plan.parts] == [
        ("option", ()), ("option", ("trio",)), ("differ", ("trio",))]
    plan = ExtractiveEngine().plan(Topic(text="Compare asyncio and trio for concurrent I/O"))
    assert plan.targets == ("asyncio", "trio") and not any(p.absent for p in plan.parts)


def test_a_comparisons_rows_are_what_the_question_names_of_every_option() -> None:
    plan, findings, report = _run(TOPIC, SOURCES)
    rows = [line for line in report.markdown.splitlines() if line.startswith("| ")]
    assert rows[0] == "| Dimension | threading | multiprocessing | asyncio |"
    assert rows[1].startswith("| Concurrent I/O in Python |")
    assert all(cell.strip() not in ("", "—") for cell in rows[1].split("|")[2:-1]), rows[1]


@pytest.mark.parametrize("n", range(1, 7))
@pytest.mark.parametrize("topic", [TOPIC, "asyncio vs threading",
                                   "Which should I use for serializing data: json or pickle?",
                                   "How does Python's garbage collector work?",
                                   "What is the best way to parse command line arguments?"])
def test_max_subquestions_is_honoured(topic: str, n: int) -> None:
    plan = _engine(SOURCES + SERIAL).plan(Topic(text=topic, max_subquestions=n))
    assert 1 <= len(plan.subquestions) <= n
    assert all(1 <= len(sq.queries) <= 3 for sq in plan.subquestions)


def test_four_options_are_four_parts_and_searched_one_by_one() -> None:
    plan = _engine(LISTS).plan(Topic(text="Compare lists, tuples, sets and dicts"))
    assert plan.targets == ("lists", "tuples", "sets", "dicts")
    assert [sq.focus for sq in plan.subquestions] == [("lists",), ("tuples",), ("sets",),
                                                      ("dicts",)]
    assert all(1 <= len(sq.queries) <= 3 for sq in plan.subquestions)


def test_each_part_of_a_two_part_question_gets_a_section() -> None:
    topic = "How does asyncio schedule coroutines and what happens when a call blocks?"
    plan = _engine(SOURCES).plan(Topic(text=topic, max_subquestions=4))
    assert plan.intent == "describe"
    assert [sq.question for sq in plan.subquestions] == [
        "How does asyncio schedule coroutines?", "asyncio: what happens when a call blocks?"]
    assert plan.subquestions[0].focus == ("asyncio",)  # the topic's word the titles name
    # The second part is searched with the subject it leaves out.
    assert plan.subquestions[1].queries[0].startswith("asyncio")


def test_without_a_corpus_each_part_is_a_section_in_the_topics_words() -> None:
    plan = ExtractiveEngine().plan(Topic(text="What does the reflog record in git and how "
                                              "long are its entries kept?"))
    first, second = [sq.question for sq in plan.subquestions]
    assert first == "What does the reflog record in git?"
    assert second.startswith("How long are") and second.endswith("entries kept?")


def test_single_option_compare_falls_back_to_describe() -> None:
    plan = _engine(SOURCES).plan(Topic(text="Compare the performance of asyncio"))
    assert plan.intent == "describe" and plan.targets == ()
    assert plan.subquestions


def test_plan_is_deterministic() -> None:
    topic = Topic(text=TOPIC, max_subquestions=5)
    assert _engine(SOURCES).plan(topic) == _engine(list(SOURCES)).plan(topic)
    assert isinstance(_engine(SOURCES).plan(topic), ResearchPlan)


# -- condense, next_queries -------------------------------------------------------------------

def test_condense_lists_sentences_of_the_source() -> None:
    sq = SubQuestion(index=0, question="How does asyncio switch tasks on its event loop?",
                     queries=("asyncio event loop",))
    notes = ExtractiveEngine(notes_per_source=2).condense(sq, ASYNCIO)
    lines = notes.splitlines()
    assert 1 <= len(lines) <= 2
    flat = " ".join(ASYNCIO.text.split())
    for line in lines:
        assert line.startswith("- ") and line[2:] in flat


def test_next_queries_asks_only_for_uncovered_terms_and_never_repeats() -> None:
    engine = ExtractiveEngine()
    sq = SubQuestion(index=0, question="How does the asyncio event loop schedule coroutines?")
    covered = Transcript(subquestion=sq, sources=[Source(
        url="u", title="t", text="The asyncio event loop schedules coroutines one at a time.")])
    assert engine.next_queries(covered, 1) == []
    partial = Transcript(subquestion=sq, sources=[Source(url="u", title="t",
                                                         text="The event loop is fast.")])
    queries = engine.next_queries(partial, 1)
    assert queries == ["asyncio schedule coroutines"]  # as written, not stemmed
    partial.queries_run.extend(queries)
    assert engine.next_queries(partial, 2) == []


# -- compress ---------------------------------------------------------------------------------

def test_compress_quotes_verbatim_and_copies_the_subquestion() -> None:
    plan = ExtractiveEngine().plan(Topic(text=TOPIC, max_subquestions=4))
    by_url = {s.url: s for s in SOURCES}
    for sq in plan.subquestions:
        finding = ExtractiveEngine(claims_per_finding=3).compress(_transcript(sq, SOURCES))
        assert finding.subquestion_index == sq.index and finding.subquestion == sq.question
        assert 1 <= len(finding.claims) <= 3
        for claim in finding.claims:
            assert claim.evidence
            for ev in claim.evidence:
                assert ev.quote in by_url[ev.url].text  # verbatim, whitespace and all
                assert ev.title == by_url[ev.url].title
            assert claim.text == " ".join(claim.evidence[0].quote.split())
        assert "Source: threading" in finding.raw_notes


def test_compress_never_quotes_code_or_boilerplate_repeated_across_pages() -> None:
    engine = ExtractiveEngine(claims_per_finding=10)
    sq = SubQuestion(index=0, question="What should readers know about threading, "
                     "multiprocessing, asyncio, cookies, policy and pools?",
                     queries=("cookie policy website", "multiprocessing Pool map"))
    finding = engine.compress(_transcript(sq, SOURCES))
    quotes = [ev.quote for c in finding.claims for ev in c.evidence]
    assert quotes
    assert not any("cookie" in q for q in quotes)  # on all three pages: boilerplate
    assert not any("pool.map" in q or "Pool(4)" in q for q in quotes)


def test_compress_drops_near_duplicates_and_rates_corroborated_claims_high() -> None:
    a = Source(url="https://a.example", title="A", text=(
        "The global interpreter lock lets only one thread run Python bytecode at a time. "
        "Threads share the memory of their process."))
    b = Source(url="https://b.example", title="B", text=(
        "Only one thread may run Python bytecode at a time under the global interpreter lock!"))
    sq = SubQuestion(index=2, question="What does the global interpreter lock do to threads?")
    finding = ExtractiveEngine().compress(_transcript(sq, [a, b]))
    gil_claims = [c for c in finding.claims if "bytecode" in c.text]
    assert len(gil_claims) == 1  # the second wording overlaps the first: said once
    assert gil_claims[0].confidence == "high"  # and the other page corroborates it
    assert all(c.confidence in ("high", "medium") for c in finding.claims)


def test_compress_without_relevant_sentences_has_no_claims() -> None:
    sq = SubQuestion(index=0, question="How do volcanoes form magma chambers?")
    finding = ExtractiveEngine().compress(_transcript(sq, SOURCES))
    assert finding.claims == ()
    empty = ExtractiveEngine().compress(Transcript(subquestion=sq))
    assert empty.claims == () and empty.raw_notes == ""


def test_compress_quotes_chinese_sources_verbatim() -> None:
    src = Source(url="https://zh.example/asyncio", title="异步", text=(
        "异步编程使用事件循环在单个线程中调度协程，等待输入输出时不会阻塞其他任务。"
        "多线程由操作系统抢占式调度，共享数据时需要加锁来保证正确性！"
        "今天天气很好，我们去公园散步吧，顺便买一些水果回家。"))
    sq = SubQuestion(index=0, question="事件循环如何调度协程？", queries=("事件循环 协程",))
    finding = ExtractiveEngine().compress(_transcript(sq, [src]))
    assert finding.claims
    assert finding.claims[0].evidence[0].quote.startswith("异步编程使用事件循环")
    assert all(ev.quote in src.text for c in finding.claims for ev in c.evidence)


# -- report -----------------------------------------------------------------------------------

def test_report_is_extractive_cited_verbatim_and_has_a_comparison_table() -> None:
    plan, findings, report = _run(TOPIC, SOURCES)
    md = report.markdown
    assert ExtractiveEngine.notice in md.split("## ")[0]  # said in the header
    assert report.engine == "offline-extractive"
    by_url = {s.url: s for s in SOURCES}
    assert report.citations
    for c in report.citations:
        assert c.quote in by_url[c.url].text
    assert [c.number for c in report.citations] == list(range(1, len(report.citations) + 1))
    assert "## Comparison" in md
    assert "| Dimension | threading | multiprocessing | asyncio |" in md
    for sq in plan.subquestions:
        assert f"## {sq.question}" in md
    assert not any("does not appear" in f for f in report.flags)  # quotes state their numbers
    assert "[E" not in md


def test_write_report_cites_every_claim_by_catalogue_key() -> None:
    plan, findings, _ = _run(TOPIC, SOURCES)
    draft = ExtractiveEngine().write_report(plan, findings)
    keys = [k for k, _ in evidence_catalog(findings)]
    bodies = " ".join(s.body for s in draft.sections)
    for key in keys:
        assert f"[{key}]" in bodies or f"[{key}]" in draft.summary or any(
            # a sentence two researchers both quoted is written once, under its first key
            c.text in bodies for f in findings for c in f.claims)
    assert [s.subquestion_index for s in draft.sections] == [f.subquestion_index for f in findings]


def test_same_inputs_give_identical_report_markdown() -> None:
    first = _run(TOPIC, SOURCES)[2]
    second = _run(TOPIC, list(SOURCES))[2]
    assert first.markdown == second.markdown
    assert first.citations == second.citations and first.flags == second.flags


def test_report_from_pydoc_text_quotes_verbatim() -> None:
    sources = [Source(url=f"pydoc:{name}", title=name, text=pydoc.plain(pydoc.render_doc(name)))
               for name in ("json", "pickle")]
    plan, findings, report = _run("Which should I use for serializing data: json or pickle?",
                                  sources, n=3)
    by_url = {s.url: s for s in sources}
    assert any(f.claims for f in findings)
    for f in findings:
        for c in f.claims:
            assert all(ev.quote in by_url[ev.url].text for ev in c.evidence)
    assert ExtractiveEngine.notice in report.markdown


def test_subquestion_without_evidence_gets_its_heading_and_insufficient_evidence() -> None:
    plan, findings, report = _run("How do volcanoes form magma chambers?", SOURCES, n=2)
    assert all(not f.claims for f in findings)
    for sq in plan.subquestions:
        assert f"## {sq.question}\n\n[insufficient evidence]" in report.markdown
    assert ExtractiveEngine.notice in report.markdown


def test_comparison_cells_quote_each_option_and_rows_may_be_shared_headings() -> None:
    from core.models import Claim, Evidence, Finding

    def claim(text: str, section: str = "") -> Claim:
        return Claim(text=text, evidence=(Evidence(url="u", title="t", quote=text,
                                                   section=section),))

    engine = ExtractiveEngine()
    plan = engine.plan(Topic(text="Compare threading and asyncio"))
    threading, asyncio_ = plan.subquestions[:2]
    findings = [
        Finding(subquestion_index=0, subquestion=threading.question, claims=(
            claim("Threading shares memory between threads.", "Memory"),
            claim("A thread that waits on a socket releases the lock.", "Waiting on sockets"))),
        Finding(subquestion_index=1, subquestion=asyncio_.question, claims=(
            claim("Asyncio runs coroutines on one event loop.", "Memory"),
            claim("A coroutine waits on a socket at an await.", "Waiting on sockets")))]
    table = engine.write_report(plan, findings).comparison_table
    rows = table.splitlines()[2:]
    assert [r.split("|")[1].strip() for r in rows] == ["Memory", "Waiting on sockets"]
    assert "shares memory" in rows[0] and "one event loop" in rows[0]
    assert "releases the lock" in rows[1] and "at an await" in rows[1]


def test_a_chinese_comparison_report_writes_its_own_words_in_chinese() -> None:
    from core.models import Claim, Evidence, Finding

    def claim(text: str) -> Claim:
        return Claim(text=text, evidence=(Evidence(url="u", title="t", quote=text),))

    engine = _engine([Source(url=f"https://zh.example/{n}", title=n, text=t) for n, t in (
        ("sqlite", "SQLite 同一时间只允许一个写入者持有写锁。SQLite 的并发写入由数据库锁串行化。"),
        ("postgresql", "PostgreSQL 通过多版本并发控制让多个写入者同时工作。PostgreSQL 的并发写入按行加锁。"))])
    plan = engine.plan(Topic(text="SQLite 和 PostgreSQL 在并发写入上有什么区别？"))
    assert plan.language == "zh" and plan.intent == "compare"
    assert [sq.question for sq in plan.subquestions] == [
        "SQLite：并发写入", "PostgreSQL：并发写入", "SQLite与PostgreSQL在并发写入上的区别"]
    findings = [Finding(subquestion_index=0, subquestion=plan.subquestions[0].question,
                        claims=(claim("SQLite 同一时间只允许一个写入者持有写锁。"),)),
                Finding(subquestion_index=1, subquestion=plan.subquestions[1].question,
                        claims=(claim("PostgreSQL 通过多版本并发控制让多个写入者同时工作。"),))]
    draft = engine.write_report(plan, findings)
    header, _, row = draft.comparison_table.splitlines()[:3]
    assert header.startswith("| 维度 | SQLite | PostgreSQL |")
    assert row.split("|")[1].strip() == "并发写入"  # the question's own aspect
    assert draft.title.startswith("研究报告：")
    assert "引用的证据回答了" in draft.conclusion
    assert "Quoted evidence" not in draft.conclusion


def test_the_notice_speaks_the_reports_language_and_stays_english_for_english() -> None:
    zh = Source(url="https://zh.example/aio", title="异步与线程", text=(
        "异步编程使用事件循环在一个线程里调度大量协程，适合等待网络的任务。"
        "线程由操作系统调度，多个线程共享同一个进程的内存。"))
    engine = ExtractiveEngine()
    plan = engine.plan(Topic(text="asyncio 和 threading 有什么区别？", max_subquestions=2))
    findings = [engine.compress(_transcript(sq, [zh])) for sq in plan.subquestions]
    draft = engine.write_report(plan, findings)
    notice = notice_of(engine, plan.language)  # what tasks/write.py passes
    assert notice == engine.notice_for("zh") and "离线" in notice
    assert not re.search(r"\b(?:Extractive|offline|report)\b", notice)
    md = assemble(plan, findings, draft, report_id="r_zh", engine=engine.name,
                  notice=notice).markdown
    assert f"> {notice}" in md.split("## ")[0]
    assert notice_of(engine, "en") == ExtractiveEngine.notice
    assert notice_of(object(), "zh") is None  # an engine without a notice (a model) has none
    assert ExtractiveEngine.notice.startswith("Extractive offline report:")
    assert ExtractiveEngine().notice_for("ko") != ExtractiveEngine.notice_for("ja")




def test_a_sentence_is_said_once_even_when_a_finding_repeats_it() -> None:
    """A weak model's finding held one quote four times; the report showed it four times."""
    from core.models import Claim, Evidence, Finding

    quote = Evidence(url="file:///c/asyncio.html", title="Asyncio",
                     quote="A coroutine gives up control at each await.")
    same = Claim(text=quote.quote, evidence=(quote,))
    other = Claim(text="Asyncio runs coroutines on one thread.",
                  evidence=(quote.model_copy(update={"quote": "Asyncio runs coroutines on one "
                                                              "thread."}),))
    plan = ExtractiveEngine().plan(Topic(text="How does asyncio schedule coroutines?"))
    finding = Finding(subquestion_index=0, subquestion=plan.subquestions[0].question,
                      claims=(same, same, same, other))
    body = ExtractiveEngine().write_report(plan, [finding]).sections[0].body
    assert body.count(quote.quote) == 1 and other.text in body
