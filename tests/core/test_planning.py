"""The offline planner (core/engine/offline/planning.py, intent.py, intent_cjk.py, phrasing.py).

Every topic here is written by the test. The promises checked: comparisons are recognised
however they are phrased (English, Chinese, Japanese, Korean), sub-questions are grammatical
questions built from the topic's parts (never the topic pasted into a template, verbs that agree
with their subject), Chinese topics get Chinese sub-questions, briefs and report headings, and
the same topic always gives the same plan.
"""

from __future__ import annotations

import re

import pytest

from core.engine.base import ReportDraft, SectionDraft
from core.engine.offline.intent import parse_topic
from core.engine.offline.phrasing import dimension_label, third_person
from core.engine.offline.planning import draft_plan
from core.models import Claim, Evidence, Finding, ResearchPlan, Topic
from core.report import assemble, fixed_heading

HAN = re.compile(r"[\u4e00-\u9fff]")


def _plan(text: str, n: int = 6, language: str | None = None) -> ResearchPlan:
    return draft_plan(Topic(text=text, max_subquestions=n, language=language))


# -- intent ------------------------------------------------------------------------------------

INTENTS = {
    # comparisons, however phrased
    "How do SQLite and PostgreSQL handle concurrent writes?": ("compare", ("SQLite", "PostgreSQL")),
    "Redis or Memcached for caching?": ("compare", ("Redis", "Memcached")),
    "Redis vs Memcached": ("compare", ("Redis", "Memcached")),
    "Redis vs. Memcached vs Hazelcast": ("compare", ("Redis", "Memcached", "Hazelcast")),
    "Redis compared with Memcached for session caching": ("compare", ("Redis", "Memcached")),
    "What are the differences between TCP and UDP in video streaming?": ("compare", ("TCP", "UDP")),
    "Differences between Kafka and RabbitMQ": ("compare", ("Kafka", "RabbitMQ")),
    "Is Go faster than Python for web servers?": ("compare", ("Go", "Python")),
    "Rust versus Go: which is faster for CLI tools?": ("compare", ("Rust", "Go")),
    "Which is faster, json or pickle?": ("compare", ("json", "pickle")),
    "How do asyncio and trio differ in cancellation semantics?": ("compare", ("asyncio", "trio")),
    "Compare the performance of Rust and Go": ("compare", ("Rust", "Go")),
    "How do embedded databases handle concurrent writers compared with server databases?":
        ("compare", ("embedded databases", "server databases")),
    "How do threads and processes share memory?": ("compare", ("threads", "processes")),
    "JSON in SQLite or PostgreSQL for storing documents?": ("compare", ("SQLite", "PostgreSQL")),
    "Compare MySQL and PostgreSQL upserts: ON DUPLICATE KEY UPDATE versus ON CONFLICT":
        ("compare", ("ON DUPLICATE KEY UPDATE", "ON CONFLICT")),
    # choices between named options
    "Should I use Flask or Django for a REST API?": ("recommend", ("Flask", "Django")),
    "PostgreSQL versus MySQL: which should I use for analytics?":
        ("recommend", ("PostgreSQL", "MySQL")),
    "Which should I use for caching: Redis or Memcached?": ("recommend", ("Redis", "Memcached")),
    # not comparisons: one mechanism of two parts, parts working together, one subject
    "How does garbage collection and reference counting work?": ("describe", ()),
    "How do garbage collection and reference counting work together?": ("describe", ()),
    "How does asyncio cancel a task?": ("describe", ()),
    "How do databases use indexes?": ("describe", ()),
    "What is a B-tree?": ("describe", ()),
    "Explain how the event loop schedules callbacks": ("describe", ()),
    "What is the best way to parse command line arguments?": ("recommend", ()),
    # Chinese
    "Python的asyncio和threading有什么区别？": ("compare", ("asyncio", "threading")),
    "SQLite 和 PostgreSQL 在并发写入上有什么区别？": ("compare", ("SQLite", "PostgreSQL")),
    "Redis与Memcached相比有哪些不同？": ("compare", ("Redis", "Memcached")),
    "Redis与Memcached相比，哪个更适合缓存会话？": ("recommend", ("Redis", "Memcached")),
    "asyncio还是threading更快？": ("compare", ("asyncio", "threading")),
    "比较Redis和Memcached": ("compare", ("Redis", "Memcached")),
    "对比 Kafka 与 RabbitMQ 的差异": ("compare", ("Kafka", "RabbitMQ")),
    "SQLite跟PostgreSQL的区别是什么？": ("compare", ("SQLite", "PostgreSQL")),
    "SQLite和PostgreSQL如何处理并发写入？": ("compare", ("SQLite", "PostgreSQL")),
    "应该用Flask还是Django？": ("recommend", ("Flask", "Django")),
    "小型 Web 应用应该选择 SQLite 还是 PostgreSQL？": ("recommend", ("SQLite", "PostgreSQL")),
    "SQLite 的 WAL 模式是如何工作的？": ("describe", ()),
    "Python的垃圾回收和引用计数是如何工作的？": ("describe", ()),
    "asyncio如何取消任务？": ("describe", ()),
    # Japanese and Korean
    "asyncioとthreadingの違いは何ですか？": ("compare", ("asyncio", "threading")),
    "asyncio와 threading의 차이점은 무엇인가요?": ("compare", ("asyncio", "threading")),
    "SQLiteのWALモードとは何ですか？": ("describe", ()),
}


@pytest.mark.parametrize("topic", list(INTENTS))
def test_intent_and_targets_are_recognised_however_phrased(topic: str) -> None:
    intent, targets = INTENTS[topic]
    plan = _plan(topic)
    assert (plan.intent, plan.targets) == (intent, targets)
    if targets:  # dimensions of difference: every option in every sub-question
        assert all(t in sq.question for sq in plan.subquestions for t in targets)
        # a relevant sentence names an option (and, for "JSON in A or B", what it handles)
        assert all(len(sq.focus) == len(targets) and
                   all(f.startswith(t) for f, t in zip(sq.focus, targets))
                   for sq in plan.subquestions)


# -- English sub-questions ---------------------------------------------------------------------

ENGLISH = [t for t in INTENTS if not re.search(r"[^\x00-\x7f]", t)]
QUESTION_WORDS = ("What", "How", "Which", "When", "Why", "Is", "Are", "Where", "Who")


@pytest.mark.parametrize("topic", ENGLISH)
def test_english_subquestions_are_questions_built_from_the_topic_parts(topic: str) -> None:
    plan = _plan(topic)
    body = topic.rstrip("?.! ")
    for sq in plan.subquestions:
        q = sq.question
        assert q.endswith("?") and q.count("?") == 1, q
        assert q.split()[0] in QUESTION_WORDS, q
        if len(body.split()) > 4 and q != topic:  # the topic rebuilt from its parts may recur
            assert body.lower() not in q.lower(), q  # not the whole topic pasted in a template
        assert not re.search(r"\b(\w+) \1\b", q, re.I), q  # no doubled words
        assert "  " not in q and " ?" not in q and " ," not in q, q
        assert 1 <= len(sq.queries) <= 3
        assert all(q_.strip() and len(q_.split()) <= 6 for q_ in sq.queries), sq.queries
        assert sq.language == "en"
    assert len({sq.question for sq in plan.subquestions}) == len(plan.subquestions)


@pytest.mark.parametrize("topic, subject", [
    ("How do databases use indexes?", "databases"),
    ("How does garbage collection and reference counting work?",
     "garbage collection and reference counting"),
    ("How do SQLite and PostgreSQL handle concurrent writes?", "SQLite and PostgreSQL"),
    ("How do threads and processes share memory?", "threads and processes"),
])
def test_plural_subjects_take_plural_verbs(topic: str, subject: str) -> None:
    questions = " ".join(sq.question for sq in _plan(topic).subquestions)
    assert subject in questions
    for singular in ("does", "is", "was"):
        assert f"{singular} {subject}" not in questions
    assert f"{subject} work?" not in questions.replace(f"do {subject} work?", "")


def test_singular_subject_takes_singular_verbs_and_the_third_person() -> None:
    plan = _plan("How does asyncio cancel a task?")
    questions = [sq.question for sq in plan.subquestions]
    assert questions[0] == "What steps does asyncio go through to cancel a task?"
    assert any("when asyncio cancels a task" in q for q in questions)
    assert any("What is asyncio and what is it for?" == q for q in questions)
    assert not any("do asyncio" in q or "does asyncio cancels" in q for q in questions)
    assert plan.subquestions[0].queries[0] == "asyncio cancel task"
    # A relevant sentence names the subject and its action (the page title may name asyncio).
    assert all(sq.focus == ("asyncio cancel a task",) for sq in plan.subquestions)
    json = _plan("JSON in SQLite or PostgreSQL for storing documents?", n=1).subquestions[0]
    assert json.focus == ("SQLite JSON", "PostgreSQL JSON")
    assert third_person("catch") == "catches" and third_person("apply") == "applies"


def test_measured_compare_topic_gets_its_action_as_the_first_dimension() -> None:
    """Measured before: planned as describe, "What is SQLite and PostgreSQL handle concurrent
    writes and what is it for?"."""
    plan = _plan("How do SQLite and PostgreSQL handle concurrent writes?", n=4)
    questions = [sq.question for sq in plan.subquestions]
    assert questions[0] == ("How do SQLite and PostgreSQL differ in how they handle concurrent "
                            "writes?")
    assert all(q.startswith("How do SQLite and PostgreSQL differ in ") for q in questions)
    assert all("concurrent writes" in q for q in questions)
    assert plan.subquestions[0].queries == ("SQLite concurrent writes",
                                            "PostgreSQL concurrent writes")
    assert all("concurrent writes" in q for sq in plan.subquestions for q in sq.queries)
    assert "handle concurrent writes" in plan.brief


def test_measured_web_topic_compares_its_two_noun_phrases() -> None:
    """Measured before: "How does embedded databases handle concurrent writers compared with
    server databases work?"."""
    plan = _plan("How do embedded databases handle concurrent writers compared with server "
                 "databases?", n=4)
    assert plan.targets == ("embedded databases", "server databases")
    for sq in plan.subquestions:
        assert "compared with" not in sq.question and " work?" not in sq.question
        assert sq.question.startswith("How do embedded databases and server databases differ in")
        assert "concurrent writers" in sq.question


def test_describe_topics_read_naturally() -> None:
    howto = [sq.question for sq in _plan("How do I cancel an asyncio task?").subquestions]
    assert howto[0] == "What are the steps to cancel an asyncio task?"
    assert not any(" I " in q for q in howto)
    noun = [sq.question for sq in _plan("What is a B-tree?", n=3).subquestions]
    assert noun == ["What is a B-tree and what is it for?", "How does a B-tree work?",
                    "How is a B-tree used in practice?"]
    together = [sq.question for sq in _plan(
        "How do garbage collection and reference counting work together?").subquestions]
    assert "How do garbage collection and reference counting work together?" in together
    best = [sq.question for sq in _plan(
        "What is the best way to parse command line arguments?").subquestions]
    assert best[0] == "What options exist to parse command line arguments?"


def test_comparative_and_versus_tails_become_the_first_dimension() -> None:
    faster = _plan("Is Go faster than Python for web servers?")
    assert faster.subquestions[0].question == (
        "How do Go and Python differ in speed for web servers?")
    versus = _plan("Rust versus Go: which is faster for CLI tools?")
    assert versus.subquestions[0].question == "How do Rust and Go differ in speed for CLI tools?"
    chosen = _plan("PostgreSQL versus MySQL: which should I use for analytics?", n=3)
    assert chosen.subquestions[-1].question == (
        "When should each of PostgreSQL and MySQL be chosen for analytics?")


# -- Chinese, Japanese, Korean -----------------------------------------------------------------

CJK = [t for t in INTENTS if re.search(r"[^\x00-\x7f]", t)]


@pytest.mark.parametrize("topic", CJK)
def test_cjk_topics_get_subquestions_in_their_language(topic: str) -> None:
    plan = _plan(topic)
    assert plan.language in ("zh", "ja", "ko")
    script = {"zh": HAN, "ja": re.compile(r"[\u3040-\u30ff]"),
              "ko": re.compile(r"[\uac00-\ud7af]")}[plan.language]
    body = topic.rstrip("？?。")
    for sq in plan.subquestions:
        assert sq.question.endswith(("？", "?")) and script.search(sq.question), sq.question
        assert not re.search(r"\b(?:How|What|Which|When|differ|does)\b", sq.question)
        if sq.question != topic:  # the topic rebuilt from its parts may recur as it was
            assert body not in sq.question  # built from the parts, not the topic pasted whole
        assert sq.language == plan.language
        assert all(len(q.split()) <= 4 and len(q) <= 30 for q in sq.queries), sq.queries
    assert script.search(plan.brief) and "Compare" not in plan.brief


def test_chinese_comparison_is_built_from_the_topic_parts() -> None:
    plan = _plan("Python的asyncio和threading有什么区别？", n=4)
    assert plan.targets == ("asyncio", "threading")
    questions = [sq.question for sq in plan.subquestions]
    assert questions[0] == "在Python中，asyncio和threading的设计目标和原理有什么区别？"
    assert "Python的asyncio" not in " ".join(questions)
    assert plan.subquestions[0].queries == ("asyncio 设计", "threading 原理")
    aspect = _plan("SQLite 和 PostgreSQL 在并发写入上有什么区别？", n=4)
    assert aspect.subquestions[0].question == "SQLite和PostgreSQL在并发写入方面的主要区别是什么？"
    assert all("并发写入" in sq.question for sq in aspect.subquestions)
    assert aspect.subquestions[0].queries == ("SQLite 并发写入", "PostgreSQL 并发写入")
    action = _plan("SQLite和PostgreSQL如何处理并发写入？", n=2)
    assert action.subquestions[0].question == "SQLite和PostgreSQL分别是如何处理并发写入的？"


def test_chinese_describe_and_recommend() -> None:
    cancel = _plan("asyncio如何取消任务？", n=3)
    assert [sq.question for sq in cancel.subquestions] == [
        "asyncio取消任务的具体步骤是什么？", "asyncio提供了哪些函数或选项来取消任务？",
        "用asyncio取消任务时可能出现哪些问题，如何避免？"]
    assert cancel.subquestions[0].queries == ("asyncio 取消任务",)
    wal = _plan("SQLite 的 WAL 模式是如何工作的？", n=2)
    assert wal.subquestions[1].question == "SQLite 的 WAL 模式是如何工作的？"[:-1] + "？"
    assert wal.subquestions[0].question == "SQLite 的 WAL 模式是什么，主要用途是什么？"
    assert wal.subquestions[0].focus == ("WAL 模式",)
    assert wal.subquestions[0].queries[0] == "sqlite wal 模式"
    gc = _plan("Python的垃圾回收和引用计数是如何工作的？", n=1)
    assert gc.subquestions[0].focus == ("垃圾回收", "引用计数")
    web = _plan("小型 Web 应用应该选择 SQLite 还是 PostgreSQL？", n=3)
    assert web.subquestions[0].question.startswith("对于小型 Web 应用，SQLite和PostgreSQL")
    assert web.subquestions[-1].question == "对于小型 Web 应用，分别在什么情况下应该选择SQLite和PostgreSQL？"


def test_the_plan_language_option_phrases_an_english_topic_in_chinese() -> None:
    plan = _plan("How do SQLite and PostgreSQL handle concurrent writes?", n=3, language="中文")
    assert plan.language == "zh" and plan.intent == "compare"
    for sq in plan.subquestions:
        assert HAN.search(sq.question) and sq.question.endswith("？")
        assert "SQLite" in sq.question and "PostgreSQL" in sq.question
        assert not HAN.search(" ".join(sq.queries))  # queries stay in the sources' language
    german = _plan("How does asyncio cancel a task?", n=2, language="de")
    assert german.language == "de"  # no German templates: English questions, German notes
    assert german.subquestions[0].question.startswith("What steps does asyncio")


# -- determinism, labels, headings -------------------------------------------------------------

@pytest.mark.parametrize("topic", list(INTENTS)[::3])
def test_same_topic_same_plan(topic: str) -> None:
    assert _plan(topic) == _plan(topic)
    assert parse_topic(topic) == parse_topic(" " + topic + " ")


def test_demo_topics_keep_their_plans() -> None:
    compare = _plan("Compare threading, multiprocessing and asyncio for concurrent I/O in Python",
                    4)
    assert compare.subquestions[0].question == ("How do threading, multiprocessing and asyncio "
                                                "differ in purpose and design for concurrent I/O "
                                                "in Python?")
    gc = _plan("How does Python's garbage collection and reference counting work?", 3)
    assert gc.intent == "describe"
    assert [sq.question for sq in gc.subquestions] == [
        "What are Python's garbage collection and reference counting and what are they for?",
        "How do Python's garbage collection and reference counting work?",
        "How are Python's garbage collection and reference counting used in practice?"]
    assert gc.subquestions[0].focus == ("Python's garbage collection", "reference counting")
    assert gc.subquestions[0].queries == ("garbage collection reference",
                                          "garbage collection reference overview")
    pick = _plan("Which should I use for serializing data: json or pickle?", 3)
    assert (pick.intent, pick.targets) == ("recommend", ("json", "pickle"))


def test_dimension_label_reads_the_axis_in_every_language() -> None:
    en = _plan("Redis vs Memcached", n=2).subquestions[1].question
    zh = _plan("Redis和Memcached有什么区别？", n=2).subquestions[1].question
    ja = _plan("RedisとMemcachedの違いは何ですか？", n=2).subquestions[1].question
    ko = _plan("Redis와 Memcached의 차이점은 무엇인가요?", n=2).subquestions[1].question
    assert dimension_label(en) == "performance and scalability"
    assert dimension_label(zh) == "性能和可扩展性"
    assert dimension_label(ja) == "性能とスケーラビリティ"
    assert dimension_label(ko) == "성능과 확장성"
    assert dimension_label("Why?") == "Why"


def _report(plan: ResearchPlan) -> str:
    ev = Evidence(url="https://zh.example/a", title="甲", quote="异步编程使用事件循环调度协程。")
    other = Evidence(url="https://zh.example/b", title="乙", quote="多线程由操作系统抢占式调度。")
    findings = [Finding(subquestion_index=sq.index, subquestion=sq.question, claims=(
        Claim(text="异步编程使用事件循环调度协程。", evidence=(ev, other), confidence="conflict"),))
        for sq in plan.subquestions]
    draft = ReportDraft(title="报告", summary="摘要 [E1]。", conclusion="结论 [E2]。",
                        comparison_table="| a | b |\n|---|---|\n| x [E1] | y [E2] |",
                        sections=tuple(SectionDraft(subquestion_index=sq.index, heading=sq.question,
                                                    body="内容 [E1]。")
                                       for sq in plan.subquestions))
    return assemble(plan, findings, draft, report_id="r", engine="e").markdown


def test_report_headings_follow_the_plan_language() -> None:
    zh = _report(_plan("Python的asyncio和threading有什么区别？", n=2))
    for part in ("summary", "comparison", "conclusion", "disputed", "references"):
        assert f"\n## {fixed_heading(part, 'zh')}\n" in zh, part
    assert "## 参考文献" in zh and "## 执行摘要" in zh and "## References" not in zh
    assert "**主题:**" in zh and "**意图:** 比较" in zh
    en = _report(_plan("asyncio vs threading", n=2))
    for heading in ("Executive summary", "Comparison", "Conclusion", "Disputed findings",
                    "References"):
        assert f"\n## {heading}\n" in en
    assert "**Intent:** compare" in en
    assert fixed_heading("references", "zh-CN") == "参考文献"
    assert fixed_heading("references", "de") == "References"  # no table: English
    assert fixed_heading("conclusion", "ja") == "結論" and fixed_heading("summary", "ko") == "요약"


def test_a_draft_heading_wins_over_the_fixed_one() -> None:
    plan = _plan("Python的asyncio和threading有什么区别？", n=1)
    draft = ReportDraft(title="t", summary="s", sections=(), headings=(("summary", "概要"),))
    markdown = assemble(plan, [], draft, report_id="r", engine="e").markdown
    assert "## 概要" in markdown and "## 执行摘要" not in markdown
