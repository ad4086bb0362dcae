"""Analysts and a writing run side by side (issue 34): readers open the store's own file, the
way DuckDB users open any file, while researchflow writes its live file and publishes copies.

Before: a run held the store's file open read-write between its writes, so `duckdb -readonly`
failed 4 of 15 tries during a batch (here: most of them), and a notebook holding the file open
read-only made every write wait and then fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from core.store import PageRecord, PageStore, ResultStore, connection
from core.store.connection import live_path, release_all

DUCKDB_CLI = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")

_READ_LOOP = """
import sys, time, duckdb
path, seconds = sys.argv[1], float(sys.argv[2])
tries = fails = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    tries += 1
    try:
        con = duckdb.connect(path, read_only=True)
        con.execute("SELECT count(*) FROM pages").fetchone()
        con.close()
    except Exception as exc:
        fails += 1
        print(str(exc).splitlines()[0], file=sys.stderr)
    time.sleep(0.02)
print(tries, fails)
"""

_NOTEBOOK = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(con.execute("SELECT count(*) FROM pages").fetchone()[0], flush=True)
sys.stdin.readline()
print(con.execute("SELECT count(*) FROM pages").fetchone()[0], flush=True)
"""


def _write_pages(path: Path, seconds: float, stop: threading.Event | None = None) -> int:
    """A run's stream of small writes, one every few milliseconds; how many it made."""
    store = PageStore(path, lock_timeout=2.0)
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (stop and stop.is_set()):
        store.put_page(f"https://example.org/{n}", PageRecord(status="ok", title=f"t{n}",
                                                               text="x" * 200))
        n += 1
        time.sleep(0.002)
    return n


def test_python_readers_never_fail_while_a_run_writes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(connection, "PUBLISH_SECONDS", 0.5)
    path = (tmp_path / "rf.duckdb").resolve()
    ResultStore(path)
    reader = subprocess.Popen([sys.executable, "-c", _READ_LOOP, str(path), "4"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    written = _write_pages(path, 4.0)
    out, err = reader.communicate(timeout=60)
    tries, fails = map(int, out.split())
    assert tries > 20 and fails == 0, err
    release_all()
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM pages").fetchone()[0] == written


@pytest.mark.skipif(DUCKDB_CLI is None, reason="the duckdb CLI (duckdb-cli wheel) is missing")
def test_the_duckdb_cli_reads_while_a_run_writes_and_sees_published_rows(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(connection, "PUBLISH_SECONDS", 0.5)
    path = (tmp_path / "rf.duckdb").resolve()
    ResultStore(path)
    stop = threading.Event()
    writer = threading.Thread(target=_write_pages, args=(path, 30.0, stop))
    writer.start()
    seen: list[int] = []
    failures: list[str] = []
    try:
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            done = subprocess.run([DUCKDB_CLI, "-readonly", "-csv", "-noheader", str(path), "-c",
                                   "SELECT count(*) FROM pages"],
                                  capture_output=True, text=True, timeout=30)
            if done.returncode or "Error" in done.stderr:
                failures.append(done.stderr.strip())
            else:
                seen.append(int(done.stdout.strip()))
    finally:
        stop.set()
        writer.join()
    assert failures == [] and len(seen) > 5
    assert max(seen) > 0  # mid-run, the published copy shows what was written
    assert seen == sorted(seen)  # a copy is replaced by a newer one, never an older


def test_a_notebook_holding_the_store_does_not_stop_a_run(tmp_path: Path) -> None:
    path = (tmp_path / "rf.duckdb").resolve()
    _write_pages(path, 0.2)
    release_all()
    before = duckdb.connect(str(path), read_only=True).execute(
        "SELECT count(*) FROM pages").fetchone()[0]
    notebook = subprocess.Popen([sys.executable, "-c", _NOTEBOOK, str(path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(notebook.stdout.readline()) == before
        started = time.monotonic()
        store = ResultStore(path, lock_timeout=1.0)  # before: StoreLockedError after 1 s
        PageStore(path, lock_timeout=1.0).put_page(
            "https://example.org/new", PageRecord(status="ok", title="new", text="y"))
        assert store.counts()["pages"] == before + 1
        release_all()  # publishes while the notebook still has the old copy open
        assert time.monotonic() - started < 5
        with duckdb.connect(str(path), read_only=True) as con:  # a new reader sees the write
            assert con.execute("SELECT count(*) FROM pages").fetchone()[0] == before + 1
        out, _ = notebook.communicate("\n", timeout=30)
        assert int(out.strip()) == before  # the open connection keeps the copy it opened
    finally:
        if notebook.poll() is None:
            notebook.kill()


def test_a_store_written_before_live_files_is_taken_over(tmp_path: Path) -> None:
    path = (tmp_path / "old.duckdb").resolve()
    _write_pages(path, 0.1)
    release_all()
    written = duckdb.connect(str(path), read_only=True).execute(
        "SELECT count(*) FROM pages").fetchone()[0]
    live_path(path).unlink()  # the layout of an earlier version: only the store's file
    assert PageStore(path).get_page("https://example.org/0", None) is not None
    assert ResultStore(path).counts()["pages"] == written
    assert live_path(path).exists()
