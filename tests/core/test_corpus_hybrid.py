"""Hybrid ranking: BM25 candidates re-ranked by the real offline embedder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from core.search import corpus_rank
from core.search.corpus import CorpusSearch
from core.search.corpus_rank import Candidate

LEAK = """Finding a memory leak in a long-running service

The server's memory grew by a few megabytes every hour until the process was killed. Heap
snapshots taken an hour apart showed the growth: a cache of parsed requests that was never
evicted kept every object alive, so the garbage collector could not free them. Bounding the
cache fixed the leak.
"""
# Off topic, stuffed with the query's words: BM25 likes it best.
SNAKES = """Python snakes at the reptile house

The python is a large snake. Our reticulated python, a python from Asia, shares the house with
a ball python and a rock python. Keepers check each python daily; a python can leak heat through
glass, so the python enclosure is warmed. Python feeding is weekly.
"""
TEA = """Tea brewing

Green tea should be brewed with water at about 80 degrees for two minutes.
"""
QUERY = "python memory leak"


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in (("leak.txt", LEAK), ("snakes.txt", SNAKES), ("tea.txt", TEA)):
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_meaning_lifts_the_passage_about_the_query_over_a_keyword_stuffed_one(
        corpus: Path, tmp_path: Path) -> None:
    bm25_only = CorpusSearch(corpus, tmp_path / "bm25.duckdb", semantic_weight=0)
    hybrid = CorpusSearch(corpus, tmp_path / "hybrid.duckdb")
    try:
        assert [h.url.rsplit("/", 1)[1].split("#")[0] for h in bm25_only.search(QUERY)] == [
            "snakes.txt", "leak.txt"]  # keywords alone get it wrong
        hits = hybrid.search(QUERY)
        assert [h.url.rsplit("/", 1)[1].split("#")[0] for h in hits] == [
            "leak.txt", "snakes.txt"]
        assert [h.rank for h in hits] == [1, 2]
        assert hybrid.search(QUERY) == hits  # same question, same answer
    finally:
        bm25_only.close()
        hybrid.close()


class _Cosines:
    """Fixed similarities, to test the blend's arithmetic and order without a model."""

    def __init__(self, values: list[float]) -> None:
        self.values = np.asarray(values, dtype=np.float32)

    def similarities(self, query: str, texts: list[str]) -> np.ndarray:
        assert len(texts) == len(self.values)
        return self.values


def _c(path: str, ord_: int, bm25: float) -> Candidate:
    return Candidate(path, ord_, "t", f"{path} {ord_}", bm25)


def test_blend_one_passage_per_document_and_stable_ties() -> None:
    candidates = [_c("b.txt", 0, 2.0), _c("a.txt", 3, 1.0), _c("a.txt", 1, 1.0),
                  _c("c.txt", 0, 1.0)]
    ranked = corpus_rank.rerank("q", candidates, 5, embedder=_Cosines([0.2, 0.8, 0.8, 0.8]),
                                weight=0.5)
    # b: 0.5*1 + 0.5*0.25 = 0.625; a and c: 0.5*0.5 + 0.5*1 = 0.75, tied: path, then passage
    assert [(r.candidate.path, r.candidate.ord) for r in ranked] == [
        ("a.txt", 1), ("c.txt", 0), ("b.txt", 0)]
    assert ranked[0].score == pytest.approx(0.75) and ranked[2].score == pytest.approx(0.625)
    # weight 0 is BM25 alone; negative cosines count as no similarity, not as a penalty
    assert [r.candidate.path for r in corpus_rank.rerank(
        "q", candidates, 2, embedder=_Cosines([-0.9, 0.1, 0.1, 0.1]), weight=0)] == [
        "b.txt", "a.txt"]
    assert corpus_rank.rerank("q", [], 3, embedder=None) == []


def test_candidates_leave_room_for_other_documents() -> None:
    query = corpus_rank.candidate_query("asyncio event loop", 5)
    assert query is not None and query.params[-1] == 25
    assert f"<= {corpus_rank.PER_DOCUMENT}" in query.sql
    assert corpus_rank.candidate_query("  ;; ", 5) is None
    assert corpus_rank.candidate_query("tea", 0) is None
    chinese = corpus_rank.candidate_query("并发写入", 2)
    assert chinese is not None and chinese.params[0] == "并发 发写 写入"
    assert "fts_main_passages" not in chinese.sql  # no words: the word index is not scanned


def test_a_long_page_is_read_from_the_section_its_headings_name() -> None:
    """Debian Reference keeps fifty sections on a page: a cross-reference to "Debian 档案库基础"
    pages away scores best on words, but the section itself is what the search shows."""
    title = "第 2 章 Debian 软件包管理"
    xref = Candidate("ch02.html", 13, title, "参考 第 2.1.4 节 “Debian 档案库基础”。", 5.0, 1.7,
                     "Debian 软件包管理 · 档案库元数据")
    section = Candidate("ch02.html", 2, title, "让我们从系统用户的角度来看看 Debian 档案库。",
                        4.8, 3.4, "Debian 软件包管理 · Debian 档案库基础")
    other = Candidate("ch09.html", 0, "第 9 章 系统技巧", "系统技巧。", 4.9, 0.0, "系统技巧")
    ranked = corpus_rank.rerank("档案库基础 Debian", [xref, section, other], 5,
                                embedder=_Cosines([0.5, 0.4, 0.3]), weight=0.5)
    assert [(r.candidate.path, r.candidate.ord) for r in ranked] == [("ch02.html", 2),
                                                                      ("ch09.html", 0)]
    # the document keeps the rank its best passage earned
    alone = corpus_rank.rerank("档案库基础 Debian", [xref], 5, embedder=_Cosines([0.5]))
    assert ranked[0].score == pytest.approx(alone[0].score)


def test_a_page_of_the_chapter_named_for_the_query_ranks_with_it() -> None:
    """PostgreSQL's "Getting Started" page only lists its sections; "1.1. Installation" links up
    to it, and outranks a page that merely says "start" more often."""
    toc = Candidate("tutorial-start.html", 0, "Chapter 1. Getting Started",
                    "1.1. Installation 1.2. Architectural Fundamentals", 3.0, 3.0,
                    "Getting Started")
    install = Candidate("tutorial-install.html", 0, "1.1. Installation",
                        "Before you can use PostgreSQL you need to install it.", 0.5, 1.0,
                        "Getting Started · Installation")
    server = Candidate("server-start.html", 1, "19.3. Starting the Database Server",
                       "Start the server before clients connect.", 1.5, 0.0,
                       "Server Setup and Operation · Starting the Database Server")
    ranked = corpus_rank.rerank("Getting Started", [toc, install, server], 5,
                                embedder=_Cosines([0.5, 0.5, 0.5]), weight=0.5)
    assert [r.candidate.path for r in ranked] == ["tutorial-start.html", "tutorial-install.html",
                                                  "server-start.html"]


def test_a_chapters_own_page_ranks_above_the_pages_it_holds() -> None:
    """Every page of PostgreSQL's "Logical Decoding" chapter is titled with it; the chapter's
    own page (their "up" link) is the overview, though they say the words more often."""
    own = Candidate("logicaldecoding.html", 0, "Chapter 49. Logical Decoding",
                    "PostgreSQL provides infrastructure to stream the modifications.", 2.0, 3.0,
                    "Server Programming")
    parts = [Candidate(f"logicaldecoding-{n}.html", 0, f"49.{i}. Logical Decoding {n.title()}",
                       f"Logical decoding {n}.", 3.0, 2.0, f"Logical Decoding · {n.title()}")
             for i, n in enumerate(("concepts", "writer"), start=2)]
    ranked = corpus_rank.rerank("Logical Decoding", [*parts, own], 5,
                                embedder=_Cosines([0.5, 0.5, 0.5]), weight=0.5)
    assert ranked[0].candidate.path == "logicaldecoding.html"
    # with none of its pages among the candidates, it is a page titled with the words
    elsewhere = dataclasses.replace(parts[0], heads="Replication · Concepts")
    alone = corpus_rank.rerank("Logical Decoding", [elsewhere, own], 5,
                               embedder=_Cosines([0.5, 0.5]), weight=0.5)
    assert alone[0].candidate.path == "logicaldecoding-concepts.html"
