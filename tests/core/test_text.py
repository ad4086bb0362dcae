"""Sentence spans, terms and scoring of the offline engine's text analysis (core/engine/text.py)."""

from __future__ import annotations

import pydoc

import pytest

from core.engine.text import Scorer, overlap, sentences, stem, terms

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
    assert terms("异步") == ["异", "步"]


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
