"""The CPython docs corpus: materialized from the running interpreter, then searched for real."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from core.search.corpus import CorpusSearch
from core.settings import Settings
from core.search.pydocs import MANIFEST, materialize_pydocs, module_doc


# With the demo's test on one worker: the corpus is materialized (~10 s) once for both.
pytestmark = pytest.mark.xdist_group("pydocs")


@pytest.fixture(scope="module")
def pydocs() -> Path:
    """The corpus where the product keeps it, in the session's cache (RESEARCHFLOW_CACHE_DIR):
    built here, or found as the demo left it (a manifest naming this interpreter)."""
    return materialize_pydocs(Settings.load().cache_dir / "corpus" / "pydocs")


def _snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_contains_reference_topics_and_library_docs(pydocs: Path) -> None:
    topics = list((pydocs / "reference").glob("*.txt"))
    assert len(topics) >= 70
    assert 'The "assert" statement' in (pydocs / "reference" / "assert.txt").read_text()
    threading_doc = (pydocs / "library" / "threading.md").read_text(encoding="utf-8")
    assert threading_doc.startswith("# threading — ")
    assert "class Lock" in threading_doc or "Lock(" in threading_doc
    assert "\x08" not in threading_doc and "\n |" not in threading_doc  # no overstrike, no gutter
    assert "inherited from builtins." not in threading_doc  # dunder boilerplate dropped
    assert "Methods inherited from" in (pydocs / "library" / "queue.md").read_text()  # the rest kept
    asyncio_doc = (pydocs / "library" / "asyncio.md").read_text(encoding="utf-8")
    assert "get_event_loop" in asyncio_doc
    for name in ("multiprocessing", "concurrent.futures", "queue", "json", "sqlite3"):
        assert (pydocs / "library" / f"{name}.md").is_file(), name
    manifest = json.loads((pydocs / MANIFEST).read_text())
    assert manifest["python"] == sys.version


def test_second_call_does_no_work(pydocs: Path) -> None:
    before = _snapshot(pydocs)
    began = time.perf_counter()
    assert materialize_pydocs(pydocs) == pydocs
    assert time.perf_counter() - began < 0.5
    assert _snapshot(pydocs) == before


def test_a_new_python_version_rematerializes(tmp_path: Path) -> None:
    target = tmp_path / "pydocs"
    few = ("json", "queue")
    materialize_pydocs(target, modules=few)
    manifest = json.loads((target / MANIFEST).read_text())
    manifest["python"] = "3.0.0 (an older interpreter)"
    (target / MANIFEST).write_text(json.dumps(manifest))
    (target / "library" / "json.md").write_text("stale")
    materialize_pydocs(target, modules=few)
    assert (target / "library" / "json.md").read_text().startswith("# json")
    assert [p.name for p in tmp_path.iterdir()] == ["pydocs"]  # no temp or old folders left


def test_racing_builders_leave_one_good_corpus(tmp_path: Path) -> None:
    target = tmp_path / "pydocs"
    few = ("json", "csv", "heapq")
    errors: list[BaseException] = []

    def build() -> None:
        try:
            materialize_pydocs(target, modules=few)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(p.name for p in (target / "library").iterdir()) == ["csv.md", "heapq.md",
                                                                      "json.md"]
    assert [p.name for p in tmp_path.iterdir()] == ["pydocs"]


def test_unimportable_modules_are_skipped() -> None:
    assert module_doc("no_such_module_anywhere") is None


def test_search_over_the_docs_finds_asyncio_for_event_loops(pydocs: Path, tmp_path: Path) -> None:
    search = CorpusSearch(pydocs, tmp_path / "pydocs.duckdb")
    stats = search.index()
    assert stats.extracted == stats.files >= 120
    hits = search.search("asyncio event loop", k=5)
    assert hits and "asyncio" in hits[0].url and hits[0].title.startswith("asyncio")
    assert sum("asyncio" in h.url for h in hits) >= 3
    source = search.read(hits[0])
    assert source is not None and hits[0].snippet in source.text
    assert "assert" in search.search("assert statement AssertionError", k=1)[0].url
    assert "threading" in search.search("threading Lock acquire release", k=3)[0].url
    again = search.index()
    assert again.extracted == 0
    search.close()
    print(f"\nindexed {stats.files} docs in {stats.seconds:.2f} s; unchanged re-index "
          f"{again.seconds * 1000:.1f} ms ({again.seconds / stats.seconds:.4f} of the first)")
