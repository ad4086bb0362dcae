"""Full-text search over real store files: what it finds and how it ranks, the index catching up
with writes, Chinese text, and a store that no search ever changes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from core.models import Source
from core.store import ResultStore, StoreError, StoreLockedError
from core.store.connection import live_path, release_all
from core.store.fulltext import index_for, search_store, snippet
from tests.core.test_store_views import cite, topic_result

LOCKS = Source(url="https://example.org/locks", title="File locks",
               text="DuckDB takes an exclusive lock on the database file when a process "
                    "opens it for writing. Other processes wait.")
PENGUINS = Source(url="https://example.org/penguins", title="Penguins",
                  text="Emperor penguins huddle through the Antarctic winter.")


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    store = ResultStore(tmp_path / "rf.duckdb")
    store.save_result(topic_result(
        "DuckDB concurrency", body="One process writes; the others are locking out [1].",
        sources=(LOCKS,), citations=(cite(1, LOCKS, "exclusive lock"),)),
        run_id="r1", engine="offline")
    store.save_result(topic_result(
        "Antarctic wildlife", body="Penguins, penguins and more penguins [1].",
        sources=(PENGUINS,), citations=(cite(1, PENGUINS, "Emperor penguins"),)),
        run_id="r1", engine="offline")
    store.save_result(topic_result(
        "Seabirds", body="Albatrosses glide; a penguin swims [1].",
        sources=(PENGUINS,), citations=(cite(1, PENGUINS, "Emperor penguins"),)),
        run_id="r1", engine="offline")
    return store


def search(store: ResultStore, query: str, tmp_path: Path, **kw):
    return search_store(store.path, query, index=tmp_path / "index" / "rf.duckdb", **kw)


def test_finds_a_report_by_a_word_of_its_body_and_a_source_by_its_text(
        store: ResultStore, tmp_path: Path) -> None:
    hits = search(store, "lock", tmp_path)  # stemmed: "locking" in the report, "lock" in the page
    assert {(h.kind, h.title) for h in hits} == {("report", "Report: DuckDB concurrency"),
                                                 ("source", "File locks")}
    report = next(h for h in hits if h.kind == "report")
    assert report.key.startswith("r_") and "locking" in report.snippet
    source = next(h for h in hits if h.kind == "source")
    assert source.key == LOCKS.url and "exclusive lock" in source.snippet

    only_sources = search(store, "opens", tmp_path, kind="sources")
    assert [(h.kind, h.key) for h in only_sources] == [("source", LOCKS.url)]
    assert search(store, "opens", tmp_path, kind="reports") == []


def test_ranks_by_bm25_and_honours_the_limit(store: ResultStore, tmp_path: Path) -> None:
    hits = search(store, "penguins", tmp_path, kind="reports")
    # Three mentions outrank one; "Seabirds" matches through the stem (penguin).
    assert [h.title for h in hits] == ["Report: Antarctic wildlife", "Report: Seabirds"]
    assert hits[0].score > hits[1].score > 0
    assert len(search(store, "penguins", tmp_path, limit=1)) == 1
    # More of the query's words rank higher than one of them.
    both = search(store, "albatrosses penguins", tmp_path, kind="reports")
    assert both[0].title == "Report: Seabirds"


def test_nothing_found_and_no_words(store: ResultStore, tmp_path: Path) -> None:
    assert search(store, "xylophone", tmp_path) == []
    with pytest.raises(ValueError, match="no words"):
        search(store, "?! …", tmp_path)


def test_a_search_never_changes_the_store(store: ResultStore, tmp_path: Path) -> None:
    path = store.path

    def fingerprint() -> tuple:
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size, hashlib.sha256(path.read_bytes()).hexdigest()

    release_all()  # the fixture's writes checkpoint when its held connection closes
    before = fingerprint()
    assert search(store, "penguins", tmp_path)
    assert search(store, "lock", tmp_path, kind="sources")
    assert search_store(path, "penguins", index=None)  # an in-memory index too
    assert fingerprint() == before
    assert not path.with_name(path.name + ".wal").exists()

    # A writer opens it right after, and the next search sees what it wrote.
    store.save_result(topic_result("Zebras", body="Zebra stripes confuse flies."),
                      run_id="r2", engine="offline")
    assert [h.title for h in search(store, "stripes", tmp_path)] == ["Report: Zebras"]


def test_the_index_follows_reruns_and_is_only_a_cache(store: ResultStore, tmp_path: Path) -> None:
    assert search(store, "penguins", tmp_path, kind="reports")
    indexed: list[int] = []
    store.save_result(topic_result("Antarctic wildlife", body="Only krill here now."),
                      run_id="r2", engine="offline")
    titles = [h.title for h in search(store, "penguins", tmp_path, kind="reports",
                                      on_indexing=indexed.append)]
    assert titles == ["Report: Seabirds"] and indexed == [1]  # only the rerun's report
    assert [h.title for h in search(store, "krill", tmp_path)] == ["Report: Antarctic wildlife"]

    # A report deleted behind researchflow's back (a DuckDB shell) leaves the index too.
    con = duckdb.connect(str(live_path(store.path)))
    con.execute("DELETE FROM reports WHERE topic = 'Seabirds'")
    con.close()
    assert [h.title for h in search(store, "penguins", tmp_path, kind="reports",
                                    on_indexing=indexed.append)] == []
    assert indexed == [1]  # nothing new to tokenise

    index = tmp_path / "index" / "rf.duckdb"
    index.unlink()
    assert [h.title for h in search(store, "krill", tmp_path)] == ["Report: Antarctic wildlife"]
    # An index that cannot be opened costs speed, not the search.
    broken = tmp_path / "broken"
    broken.mkdir()
    assert search_store(store.path, "krill", index=broken)[0].title == "Report: Antarctic wildlife"


def test_a_page_is_searched_in_the_version_read_last(store: ResultStore,
                                                     tmp_path: Path) -> None:
    """The store keeps every version of a page; search shows each URL once, as last read."""
    assert [h.key for h in search(store, "emperor", tmp_path, kind="sources")] == [PENGUINS.url]
    moved = PENGUINS.model_copy(update={"text": "Adelie penguins nest on the Antarctic coast."})
    store.save_result(topic_result("Nesting", body="Penguins nest [1].", sources=(moved,),
                                   citations=(cite(1, moved, "Adelie penguins"),)),
                      run_id="r2", engine="offline")
    assert search(store, "emperor", tmp_path, kind="sources") == []
    [hit] = search(store, "adelie", tmp_path, kind="sources")
    assert hit.key == PENGUINS.url and "Adelie" in hit.snippet
    assert len(search(store, "penguins", tmp_path, kind="sources")) == 1


def test_chinese_text_is_found_by_character_bigrams(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "zh.duckdb")
    page = Source(url="https://example.cn/duckdb", title="嵌入式数据库",
                  text="DuckDB是一个嵌入式分析数据库，支持多线程查询。")
    store.save_result(topic_result("DuckDB 是什么", title="DuckDB 简介", language="zh",
                                   body="DuckDB是一个进程内的数据库管理系统[1]。",
                                   sources=(page,), citations=(cite(1, page, "嵌入式分析数据库"),)),
                      run_id="r1", engine="offline")
    hits = search_store(store.path, "数据库", index=None)
    assert {h.kind for h in hits} == {"report", "source"}
    assert all("数据库" in h.snippet for h in hits)
    assert [h.key for h in search_store(store.path, "多线程", index=None)] == [page.url]
    assert search_store(store.path, "企鹅", index=None) == []


def test_missing_or_foreign_store_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no researchflow store"):
        search_store(tmp_path / "none.duckdb", "anything", index=None)
    assert not (tmp_path / "none.duckdb").exists()
    duckdb.connect(str(tmp_path / "other.duckdb")).close()  # a DuckDB file, not a store
    with pytest.raises(StoreError, match="not a researchflow store"):
        search_store(tmp_path / "other.duckdb", "anything", index=None)


def test_index_path_is_per_store_under_the_cache(tmp_path: Path) -> None:
    a = index_for(tmp_path / "a.duckdb", tmp_path / "cache")
    assert a.parent == tmp_path / "cache" / "search" and a.suffix == ".duckdb"
    assert a != index_for(tmp_path / "b.duckdb", tmp_path / "cache")


def test_snippet_centres_on_the_first_match() -> None:
    text = "filler " * 60 + "the runner was running " + "tail " * 60
    cut = snippet(text, ["running", "run"], width=80)
    assert "runner" in cut and cut.startswith("…") and cut.endswith("…") and len(cut) <= 82
    assert snippet("short text", ["absent"]) == "short text"


_HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])  # a writer in another process: the file is locked
print("ready", flush=True)
sys.stdin.readline()
"""


def test_a_store_locked_by_another_process_is_a_clear_error(store: ResultStore,
                                                            tmp_path: Path) -> None:
    release_all()  # the other process is the holder now
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(live_path(store.path))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError, match=f"PID {holder.pid}"):
            search(store, "penguins", tmp_path, lock_timeout=0.2)
    finally:
        holder.communicate("\n", timeout=30)
    assert search(store, "penguins", tmp_path)  # and the index was left usable
