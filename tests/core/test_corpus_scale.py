"""Indexing at scale on generated corpora: twins indexed once, a process pool that changes
nothing but speed, small batches, and incremental updates through all of it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from core.search import corpus_build
from core.search.corpus import CorpusSearch
from core.search.corpus_extract import content_key
from tests.fakes.generated_corpus import html_page, text_page, write_corpus

TITLE = "Caring for a sourdough starter"
PARAGRAPHS = ["Feed the starter with equal weights of flour and water every day.",
              "A starter that smells of acetone is hungry: feed it more often."]


def _tables(index: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(index), read_only=True) as db:
        return {"files": db.execute("SELECT path, sha256, content_key, title, text, dup_of "
                                    "FROM files ORDER BY path").fetchall(),
                "passages": db.execute("SELECT * FROM passages ORDER BY passage_id").fetchall(),
                "grams": db.execute("SELECT * FROM passage_grams ORDER BY passage_id"
                                    ).fetchall()}


def _name(url: str) -> str:
    return url.rsplit("/", 1)[1].split("#")[0]


def test_a_page_and_its_text_source_are_indexed_once(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "starter.html").write_text(html_page(TITLE, PARAGRAPHS), encoding="utf-8")
    (root / "starter.txt").write_text(text_page(TITLE, PARAGRAPHS), encoding="utf-8")
    (root / "starter.md").write_text(f"# {TITLE}\n\n**Feed** the starter with equal weights of "
                                     "[flour](https://example.com/flour) and water every day.\n"
                                     "\nA starter that smells of _acetone_ is hungry: feed it "
                                     "more often.\n", encoding="utf-8")
    (root / "other.txt").write_text("Bread notes\n\nRye flour makes a livelier starter.\n",
                                    encoding="utf-8")
    search = CorpusSearch(root, tmp_path / "index.duckdb")
    try:
        first = search.index()
        assert (first.files, first.extracted, first.duplicates) == (4, 4, 2)
        hits = search.search("acetone hungry", k=5)
        assert [_name(h.url) for h in hits] == ["starter.html"]  # the smallest path stands for all
        assert search.index().extracted == 0  # twins are known: nothing to redo

        (root / "starter.html").unlink()  # the representative goes: a twin takes its place
        gone = search.index()
        assert (gone.extracted, gone.removed, gone.duplicates, gone.rebuilt) == (0, 1, 1, True)
        assert [_name(h.url) for h in search.search("acetone hungry")] == ["starter.md"]

        (root / "starter.txt").write_text(text_page(TITLE, PARAGRAPHS + ["Keep it warm."]),
                                          encoding="utf-8")  # no longer a twin
        apart = search.index()
        assert (apart.extracted, apart.duplicates) == (1, 0)
        assert {_name(h.url) for h in search.search("acetone hungry")} == {
            "starter.md", "starter.txt"}
    finally:
        search.close()


def test_content_key_ignores_markup_case_and_spacing_but_not_words() -> None:
    assert content_key("# Title\n\n**Bold** [link](http://x.y/z) and _more_") == content_key(
        "title bold   link\nAND more")
    assert content_key("one two") != content_key("two one")
    assert content_key("  \n ** ") is None


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("generated") / "docs"
    pages = write_corpus(root, corpus_build.PARALLEL_MIN + 12, chinese_every=5, copy_every=10)
    assert sum(p.duplicate_of is not None for p in pages) == 6
    return root


def test_a_process_pool_builds_the_same_index_as_one_process(generated: Path, tmp_path: Path,
                                                             monkeypatch) -> None:
    pools = []
    real_pool = corpus_build._pool
    monkeypatch.setattr(corpus_build, "_pool", lambda n: pools.append(n) or real_pool(n))
    serial = CorpusSearch(generated, tmp_path / "serial.duckdb", workers=1)
    parallel = CorpusSearch(generated, tmp_path / "parallel.duckdb", workers=2, batch_size=5)
    try:
        a, b = serial.index(), parallel.index()
        assert pools == [2]  # only the parallel build started workers
        assert (a.files, a.extracted, a.duplicates) == (b.files, b.extracted, b.duplicates)
        assert a.duplicates == 6
        for query in ("durable transaction lock", "望远镜观测星系", "savory broth"):
            assert serial.search(query) == parallel.search(query) != []
    finally:
        serial.close()
        parallel.close()
    assert _tables(tmp_path / "serial.duckdb") == _tables(tmp_path / "parallel.duckdb")


def test_incremental_updates_through_the_pool_and_small_batches(generated: Path,
                                                                tmp_path: Path) -> None:
    root = tmp_path / "copy"
    root.mkdir()
    for path in sorted(generated.rglob("*.*")):
        target = root / path.relative_to(generated)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    search = CorpusSearch(root, tmp_path / "index.duckdb", workers=2, batch_size=1)
    try:
        first = search.index()
        assert first.extracted == first.files == len(list(root.rglob("*.*")))
        again = search.index()
        assert (again.extracted, again.rebuilt) == (0, False)
        page = sorted(root.rglob("*.html"))[3]
        page.write_text(page.read_text(encoding="utf-8").replace(
            "</article>", "<p>The zanzibar quartz gauge glows.</p></article>"), encoding="utf-8")
        changed = search.index()
        assert (changed.extracted, changed.rebuilt) == (1, True)
        assert _name(search.search("zanzibar quartz gauge")[0].url) == page.name
    finally:
        search.close()
    fresh = tmp_path / "fresh.duckdb"
    rebuilt = CorpusSearch(root, fresh, workers=1)
    rebuilt.index()
    rebuilt.close()
    assert _tables(tmp_path / "index.duckdb") == _tables(fresh)  # updates = a build from scratch


def test_an_index_of_the_old_schema_is_rebuilt(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("Alpha\n\nThe alpha page.\n", encoding="utf-8")
    index = tmp_path / "index.duckdb"
    with duckdb.connect(str(index)) as db:
        db.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        db.execute("INSERT INTO meta VALUES ('schema', '1'), ('passage_chars', '1500'), "
                   "('fts', '1')")
        db.execute("CREATE TABLE files (path VARCHAR, size BIGINT, mtime_ns BIGINT, "
                   "sha256 VARCHAR, title VARCHAR, text VARCHAR)")
    search = CorpusSearch(root, index)
    try:
        assert search.index().extracted == 1
        assert search.search("alpha")
    finally:
        search.close()
