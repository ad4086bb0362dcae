"""Chinese, Japanese and Korean queries over a real corpus index: the bigram index finds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.text import cjk
from core.search import corpus_rank
from core.search.corpus import CorpusSearch

WRITES = """# 数据库的并发控制

当多个客户端同时写入同一张表时，数据库使用锁和预写日志来处理并发写入，保证事务的一致性。
查询只读取已经提交的快照，所以读操作不会阻塞写操作。
"""
COMPOST = """# 花园里的堆肥

秋天把落叶和厨房残渣放进堆肥箱，春天就能得到肥沃的土壤，适合种植番茄和幼苗。
"""
BACKUP = """# 数据库的备份

每天夜里把数据库复制到另一台机器上，并保留七天的备份文件，以便恢复误删的数据。
"""
JAPANESE = "東京の天気\n\n明日の東京は晴れのち曇り、最高気温は二十度の予報です。\n"
KOREAN = "김치 담그기\n\n배추를 소금에 절인 뒤 양념을 버무려 김치를 담급니다.\n"
ENGLISH = """Concurrent writes in an embedded database

An embedded database serialises concurrent writes with a single writer lock.
"""


@pytest.fixture()
def search(tmp_path: Path):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in (("writes.md", WRITES), ("compost.md", COMPOST), ("backup.md", BACKUP),
                       ("tokyo.txt", JAPANESE), ("kimchi.txt", KOREAN),
                       ("english.txt", ENGLISH)):
        (root / name).write_text(text, encoding="utf-8")
    backend = CorpusSearch(root, tmp_path / "index.duckdb")
    yield backend
    backend.close()


def test_a_chinese_question_finds_the_chinese_passage(search: CorpusSearch) -> None:
    hits = search.search("数据库如何处理并发写入", k=3)
    assert hits and hits[0].title == "数据库的并发控制"
    # the snippet is the sentence about concurrent writes, and verbatim in what read() returns
    assert "并发写入" in hits[0].snippet
    source = search.read(hits[0])
    assert source is not None and hits[0].snippet in source.text
    # the other database page shares 数据/据库 only: it may follow, never lead
    assert [h.title for h in hits].index("数据库的并发控制") == 0


def test_the_word_index_alone_cannot_see_chinese(search: CorpusSearch) -> None:
    """Why the bigram index exists: the fts tokeniser keeps a-z only, so before it this query
    found nothing at all."""
    search.index()
    rows = search._query("SELECT count(*) FROM (SELECT fts_main_passages.match_bm25("
                         "passage_id, ?) AS s FROM passages) WHERE s IS NOT NULL",
                         ["数据库如何处理并发写入"])
    assert rows == [(0,)]


def test_japanese_korean_and_mixed_queries(search: CorpusSearch) -> None:
    assert search.search("東京の天気予報")[0].title == "東京の天気"
    assert search.search("김치 양념")[0].title == "김치 담그기"
    mixed = search.search("embedded database 并发写入", k=6)
    titles = [h.title for h in mixed]
    assert {"数据库的并发控制", "Concurrent writes in an embedded database"} <= set(titles)
    assert search.search("堆肥")[0].title == "花园里的堆肥"  # a two-character query: one bigram


def test_bigrams() -> None:
    assert cjk.bigrams("数据库 and 库") == ["数据", "据库", "库"]
    assert cjk.bigrams("plain English") == [] and not cjk.has_cjk("plain English")
    assert cjk.runs("DuckDB是嵌入式数据库。") == ["是嵌入式数据库"]
    assert cjk.bigrams("한국어") == ["한국", "국어"]


def test_a_cjk_snippet_is_the_best_sentence_not_the_heading() -> None:
    body = "并发写入\n\n备份每天进行。数据库用锁处理并发写入。查询读取快照。"
    assert corpus_rank.snippet(body, "并发写入") == "数据库用锁处理并发写入。"
    assert corpus_rank.snippet(body, "快照") == "查询读取快照。"
    assert corpus_rank.snippet(body, "毫无关系") in body  # no overlap: still verbatim
