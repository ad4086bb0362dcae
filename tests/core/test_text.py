"""Sentence spans, terms and scoring of the offline engine's text analysis (core/engine/sentences.py)."""

from __future__ import annotations

import pydoc

import pytest

from core.engine.sentences import Scorer, overlap, sentences, stem, terms

PROSE = (
    "The asyncio module provides infrastructure for single-threaded concurrent code. "
    "It multiplexes I/O access over sockets and other resources!  Does it run coroutines "
    "on an event loop that the application owns?\n\n"
    "A second paragraph starts here and explains that\ntasks wrap coroutines for scheduling."
)

PYDOC_LIKE = """NAME
    json - JSON (JavaScript Object Notation) <https://json.org> is a subset of JavaScript.

DESCRIPTION
    The json module exposes an API familiar to users of the standard library marshal module.

    >>> import json
    >>> json.dumps(['foo', {'bar': ('baz', None, 1.0, 2)}])

FUNCTIONS
    dump(obj, fp, *, skipkeys=False, ensure_ascii=True, check_circular=True)
"""

MARKDOWN = """# Concurrency in Python overview

## Threads

Threads share memory and are scheduled by the operating system kernel itself.

```python
def worker(queue):
    while True:
        item = queue.get()
```

| option | speed | notes about the option |
|--------|-------|------------------------|
"""

CHINESE = ("异步编程是一种并发编程模型，它允许程序在等待输入输出操作时继续执行其他任务而不会阻塞。"
           "线程由操作系统调度，每个线程都有自己的调用栈和局部变量空间！"
           "你应该选择哪一个方案来处理大量的网络连接请求呢？好的。")


def _assert_exact(text: str) -> list[str]:
    found = sentences(text)
    for s in found:
        assert text[s.start:s.end] == s.text
    return [s.text for s in found]


def test_prose_sentences_are_exact_spans_in_order() -> None:
    texts = _assert_exact(PROSE)
    assert texts == [
        "The asyncio module provides infrastructure for single-threaded concurrent code.",
        "It multiplexes I/O access over sockets and other resources!",
        "Does it run coroutines on an event loop that the application owns?",
        "A second paragraph starts here and explains that\ntasks wrap coroutines for scheduling.",
    ]


def test_clean_collapses_whitespace_but_text_stays_verbatim() -> None:
    last = sentences(PROSE)[-1]
    assert "\n" in last.text
    assert last.clean == "A second paragraph starts here and explains that tasks wrap coroutines for scheduling."


def test_a_lead_in_and_its_lines_read_as_one_sentence_without_doubled_punctuation() -> None:
    # PostgreSQL's "Using Descriptor Areas" quoted "... DESCRIPTOR identifier;; The identifier"
    text = ("Before you can use an SQL descriptor area, you need to allocate one:\n"
            "EXEC SQL ALLOCATE DESCRIPTOR identifier;\n"
            "The identifier serves as the “variable name” of the descriptor area.")
    assert [s.clean for s in sentences(text)] == [
        "Before you can use an SQL descriptor area, you need to allocate one: EXEC SQL ALLOCATE "
        "DESCRIPTOR identifier; The identifier serves as the “variable name” of the descriptor "
        "area."]
    # nor a semicolon inside a sentence the lines wrap ("... text search; configurations")
    wrapped = sentences("Remove the text search parser my_parser:\nDROP TEXT SEARCH PARSER "
                        "my_parser;\nThis command will not succeed if there are any existing "
                        "text search\nconfigurations that use the parser.")
    assert wrapped[0].clean.endswith("DROP TEXT SEARCH PARSER my_parser; This command will not "
                                     "succeed if there are any existing text search "
                                     "configurations that use the parser.")
    listed = sentences("You can extend SQL by adding:\nfunctions (starting in Section 38.3)\n"
                       "aggregates (starting in Section 38.12)\ndata types\n")
    assert listed[0].clean.endswith("38.3); aggregates (starting in Section 38.12); data types")


def test_pydoc_name_lines_headings_and_doctests_are_skipped() -> None:
    texts = _assert_exact(PYDOC_LIKE)
    assert texts == ["The json module exposes an API familiar to users of the standard library "
                     "marshal module."]


def test_markdown_headings_code_and_tables_are_skipped() -> None:
    texts = _assert_exact(MARKDOWN)
    assert texts == ["Threads share memory and are scheduled by the operating system kernel itself."]


def test_real_pydoc_output_yields_only_prose() -> None:
    text = pydoc.plain(pydoc.render_doc("json"))
    texts = _assert_exact(text)
    assert texts, "the json module's pydoc page has prose sentences"
    for t in texts:
        assert not t.startswith(("NAME", "json - ", ">>>"))
        assert t[-1] in ".!?"


def test_chinese_sentences_split_on_full_width_marks() -> None:
    texts = _assert_exact(CHINESE)
    assert texts == [
        "异步编程是一种并发编程模型，它允许程序在等待输入输出操作时继续执行其他任务而不会阻塞。",
        "线程由操作系统调度，每个线程都有自己的调用栈和局部变量空间！",
        "你应该选择哪一个方案来处理大量的网络连接请求呢？",
    ]  # "好的。" is a fragment, too short to quote


def test_mixed_chinese_and_english_keeps_spans() -> None:
    text = ("Python 的 asyncio 模块使用事件循环来调度协程并处理网络请求。"
            "The event loop runs in a single thread and switches between tasks cooperatively.")
    texts = _assert_exact(text)
    assert texts == ["Python 的 asyncio 模块使用事件循环来调度协程并处理网络请求。",
                     "The event loop runs in a single thread and switches between tasks "
                     "cooperatively."]


@pytest.mark.parametrize("text", [
    "", "   \n\n  ", "short.", "no terminal punctuation in this rather long line of words",
    "f(x)[0] = {1: 2, 3: (4, 5)}; g(y)[6] += 7 * 8 - 9 / 10; h = 11 + 12 - 13 * 14 ok.",
    "def run(self, loop): return loop.run_until_complete(self.main()) for the caller.",
])
def test_fragments_and_code_give_no_sentences(text: str) -> None:
    assert sentences(text) == []


def test_max_chars_drops_overlong_sentences() -> None:
    long = "word " * 200 + "end."
    assert sentences(long) == []
    assert len(sentences(long, max_chars=2000)) == 1


def test_terms_drop_stopwords_and_stem_plurals() -> None:
    assert terms("The threads and the processes are compared") == ["thread", "process", "compared"]
    assert stem("libraries") == "library"
    assert stem("class") == "class"  # -ss is not a plural
    assert stem("is") == "is"  # too short to stem


def test_terms_keep_technical_tokens_and_chinese_characters() -> None:
    assert "c++" in terms("C++ and C# interop")
    assert "i/o" not in terms("concurrent I/O")  # '/' splits: both halves are single letters
    assert terms("异步") == ["异步"]


def test_chinese_terms_are_bigrams_of_han_runs_cut_at_function_characters() -> None:
    # 的 glues words: no 池的 or 的容; question wording (哪些, 主要) says nothing of the subject.
    assert terms("电池的容量有哪些") == ["电池", "容量"]
    assert terms("锂电池") == ["锂电", "电池"] and terms("锂") == ["锂"]
    assert "衰减" in terms("Python 的容量衰减 test")
    assert "python" not in terms("Python 的容量衰减")  # a stop word, as in English topics


def test_scorer_matches_chinese_by_shared_bigrams() -> None:
    pool = ["锂离子电池的容量会随着循环逐渐衰减。", "光伏组件把光能直接转化为电能。"]
    scorer = Scorer(pool)
    query = terms("电池容量衰减")
    assert scorer.score(0, query) > 0 == scorer.score(1, query)


def test_scorer_prefers_the_sentence_about_the_query() -> None:
    pool = ["The event loop schedules coroutines and callbacks.",
            "Pickle serializes arbitrary Python objects to bytes.",
            "Threads are scheduled by the operating system."]
    scorer = Scorer(pool)
    q = terms("how does pickle serialize objects")
    scores = [scorer.score(i, q) for i in range(len(pool))]
    assert scores.index(max(scores)) == 1
    assert scores[0] == 0.0


def test_overlap_is_jaccard_of_terms() -> None:
    assert overlap("threads share memory", "threads share memory") == 1.0
    assert overlap("threads share memory", "pickle writes bytes") == 0.0
    assert 0 < overlap("threads share memory", "processes share memory") < 1


@pytest.mark.parametrize(("singular", "plural"), [
    ("schedule", "schedules"), ("cache", "caches"), ("process", "processes"),
    ("match", "matches"), ("library", "libraries"), ("queue", "queues"), ("degree", "degrees"),
    ("database", "databases"), ("class", "classes"), ("type", "types"), ("thread", "threads"),
])
def test_singular_and_plural_share_a_stem(singular: str, plural: str) -> None:
    assert stem(singular) == stem(plural)


def test_title_line_glued_to_a_sentence_is_left_out() -> None:
    text = ("Multiprocessing guide\nThe multiprocessing package starts separate processes, each "
            "with its own memory.\n\nThe threading module runs\nseveral threads inside one "
            "process, sharing its memory.")
    assert _assert_exact(text) == [
        "The multiprocessing package starts separate processes, each with its own memory.",
        "The threading module runs\nseveral threads inside one process, sharing its memory.",
    ]


def test_chinese_splits_on_semicolons_and_fullwidth_marks_with_closing_quotes() -> None:
    text = ("负极表面的界面膜在循环中不断增厚；活性锂因此被持续消耗掉了。"
            "工程师说：“高温会明显加速电解液的分解。”快速充电可能导致负极析锂吗？"
            "这是实验室里反复验证过的结果！")
    assert _assert_exact(text) == [
        "负极表面的界面膜在循环中不断增厚；",
        "活性锂因此被持续消耗掉了。",
        "工程师说：“高温会明显加速电解液的分解。”",
        "快速充电可能导致负极析锂吗？",
        "这是实验室里反复验证过的结果！",
    ]


def test_half_width_marks_after_han_end_a_sentence_too() -> None:
    text = "快速充电时负极可能出现析锂现象!金属锂沉积会造成不可逆的容量损失;"
    assert _assert_exact(text) == ["快速充电时负极可能出现析锂现象!",
                                   "金属锂沉积会造成不可逆的容量损失;"]


def test_short_normal_chinese_sentences_are_kept_and_scraps_dropped() -> None:
    # Eleven characters is a whole Chinese sentence; "好的。" and "然后呢；" are not.
    assert _assert_exact("高温会加速电解液分解！好的。然后呢；") == ["高温会加速电解液分解！"]


def test_chinese_heading_lines_are_not_glued_to_the_next_sentence() -> None:
    text = "Home\n容量衰减的机制\n锂离子电池在循环中不断消耗可用的活性锂。"
    assert _assert_exact(text) == ["锂离子电池在循环中不断消耗可用的活性锂。"]


def test_api_parameter_entries_and_link_captions_are_not_prose() -> None:
    text = ("Workers run the calls. mp_context: A multiprocessing context to launch the workers. "
            "The pool shuts down cleanly once every submitted call has finished running.\n\n"
            "Storage engine table options - in the database server documentation.\n\n"
            "Index storage settings - documentation on every storage setting there is.")
    assert _assert_exact(text) == [
        "The pool shuts down cleanly once every submitted call has finished running."]


def test_sentence_case_headings_before_a_new_sentence_are_left_out() -> None:
    text = ("Reading rows: compatibility with native date and time types\n"
            "The driver converts stored text into date objects when the column says so.\n\n"
            "A wrapped line of a sentence that goes on past the end of this line with\n"
            "Python named in the middle is still one sentence.")
    assert _assert_exact(text) == [
        "The driver converts stored text into date objects when the column says so.",
        "A wrapped line of a sentence that goes on past the end of this line with\n"
        "Python named in the middle is still one sentence."]


def test_a_chinese_heading_before_a_latin_opening_is_left_out() -> None:
    text = "写入日志的工作方式：读写互不阻塞\nWAL 是预写日志（write-ahead log）的缩写。"
    assert _assert_exact(text) == ["WAL 是预写日志（write-ahead log）的缩写。"]


def test_a_short_or_labelled_heading_before_a_sentence_is_left_out() -> None:
    # Page headings as HTML extraction leaves them: a line of their own over the first sentence.
    text = ("Franz Kafka's letters and their delivery\n"
            "Franz Kafka wrote hundreds of letters, and their delivery by post shaped his "
            "stories.\n"
            "PostgreSQL asyncpg driver: Disabling the PostgreSQL JIT to improve ENUM datatype "
            "handling\nAsyncpg has an issue when using PostgreSQL ENUM datatypes on new "
            "connections.")
    assert _assert_exact(text) == [
        "Franz Kafka wrote hundreds of letters, and their delivery by post shaped his stories.",
        "Asyncpg has an issue when using PostgreSQL ENUM datatypes on new connections."]


def test_a_wrapped_line_stopping_on_a_function_word_stays_in_its_sentence() -> None:
    # Eight words, like a short heading, but it stops on "for": the sentence goes on.
    text = ("Each new connection is handed over for\n"
            "PostgreSQL to check before the engine uses it.")
    assert _assert_exact(text) == [text]
