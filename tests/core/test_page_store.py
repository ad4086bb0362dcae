"""The page store when its file cannot be used (locked by another process, paused, not a file,
newer than this code): it costs only the cache, never a fetch or a search. And schema v5: the
page cache may be the first to open an old file, and migrates it keeping every row.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from core.search.cache import CachedFetcher, CachedSearch
from core.store import SCHEMA_VERSION, TABLES, PageRecord, PageStore, ResultStore
from core.store import migrations
from core.store.connection import live_path, release_all
from tests.core.test_page_cache import FakeBackend, FakeFetch, fetcher, norm, rows
from tests.core.test_store_ledger import _V1_TABLES, dump, make_v1_file, schema_shape


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "rf.duckdb"


# -- a store that cannot be used --------------------------------------------------------------

_HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
con.close()
"""


def test_a_locked_store_degrades_to_fetching(path: Path, caplog: pytest.LogCaptureFixture
                                             ) -> None:
    PageStore(path)  # the file exists, at v5
    release_all()  # the other process is the holder now
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(live_path(path))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        fetch = FakeFetch()
        with caplog.at_level(logging.WARNING, logger="researchflow.store.pages"):
            cached = fetcher(path, fetch, lock_timeout=0.1, retry_after=0)
            for _ in range(2):
                assert cached("https://example.org/a").title == "Title of https://example.org/a"
            backend = FakeBackend()
            search = CachedSearch(backend, cached._store, ttl_hours=24)
            assert len(search.search("q", 2)) == 2
        assert len(fetch.calls) == 2 and len(backend.calls) == 1  # no cache, no failure
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "page cache" in warnings[0].getMessage()
    finally:
        holder.communicate("\n", timeout=30)
    # Once the other process lets go, the same store caches again.
    cached("https://example.org/a")
    cached("https://example.org/a")
    assert len(fetch.calls) == 3 and cached.hits == 1


def test_a_paused_store_is_left_alone_for_a_while(path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = PageStore(path, retry_after=60)
    opened: list[Path] = []
    import core.store.backend as backend  # where a file store opens its connections

    def broken(p: Path, **kw: object) -> object:
        opened.append(p)
        raise duckdb.IOException("Could not set lock on file")

    monkeypatch.setattr(backend, "writable", broken)
    store.put_page("k", PageRecord(status="ok", text="x"))
    assert store.get_page("k", 24) is None and store.get_search("k", 24) is None
    assert len(opened) == 1  # the first failure paused it; the next calls did not wait


def test_an_unusable_store_path_degrades_to_fetching(tmp_path: Path) -> None:
    directory = tmp_path / "is-a-directory.duckdb"
    directory.mkdir()
    under_a_file = tmp_path / "plain-file" / "rf.duckdb"
    (tmp_path / "plain-file").write_text("not a folder")
    for bad in (directory, under_a_file):
        fetch = FakeFetch()
        cached = fetcher(bad, fetch, retry_after=0)
        cached("https://example.org/a")
        cached("https://example.org/a")
        assert len(fetch.calls) == 2 and cached.hits == 0


def test_a_newer_store_is_not_touched(path: Path) -> None:
    ResultStore(path)
    con = duckdb.connect(str(live_path(path)))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    fetch = FakeFetch()
    cached = fetcher(path, fetch)
    cached("https://example.org/a")
    cached("https://example.org/a")
    assert len(fetch.calls) == 2
    assert rows(path, "SELECT value FROM meta") == [("99",)]


# -- schema v5 --------------------------------------------------------------------------------

def make_v4_file(path: Path) -> None:
    """A version-4 store with rows: the v1 file taken through the frozen steps 1 to 3."""
    make_v1_file(path)
    con = duckdb.connect(str(path))
    for step in (1, 2, 3):
        migrations.MIGRATIONS[step](con)
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.execute("INSERT INTO model_limits VALUES ('gpt-x', 128000, NULL, NULL, now())")
    con.close()


def test_v4_file_migrates_to_v5_keeping_every_row(tmp_path: Path) -> None:
    path = tmp_path / "v4.duckdb"
    make_v4_file(path)
    before = {t: dump(path, t) for t in _V1_TABLES}
    limits = rows(path, "SELECT model, context_window FROM model_limits")

    fetch = FakeFetch()
    cached = fetcher(path, fetch)  # the page cache may be the first to open an old file
    cached("https://example.org/a")
    cached("https://example.org/a")
    assert len(fetch.calls) == 1

    assert rows(path, "SELECT value FROM meta") == [(str(SCHEMA_VERSION),)]
    assert {t: dump(path, t) for t in _V1_TABLES} == before
    assert rows(path, "SELECT model, context_window FROM model_limits") == limits
    store = ResultStore(path)
    assert store.schema_version() == SCHEMA_VERSION
    assert store.counts()["pages"] == 1 and store.counts()["searches"] == 0
    assert list(store.counts()) == list(TABLES) and TABLES[-3:-1] == ("pages", "searches")
    ResultStore(tmp_path / "fresh.duckdb")
    assert schema_shape(path) == schema_shape(tmp_path / "fresh.duckdb")


def test_page_status_is_checked() -> None:
    with pytest.raises(ValueError, match="status"):
        PageRecord(status="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        CachedFetcher(FakeFetch(), None, ttl_hours=-1, key=norm)
