"""A run whose process was killed does not stay 'running': the next run on the host marks it
crashed, while runs whose process is alive are left alone."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from core.store import ResultStore, query_readonly
from core.store.connection import live_path

ROOT = Path(__file__).resolve().parents[2]
KILLED = """
import os, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from core.store import ResultStore
ResultStore(Path({db!r})).start_run("killed", "b1", "offline", "corpus", {{}})
os.kill(os.getpid(), 9)
"""


def _runs(db: Path) -> dict[str, tuple]:
    _, rows = query_readonly(db, "SELECT run_id, status, finished_at IS NOT NULL, host, pid "
                                 "FROM runs")
    return {r[0]: r[1:] for r in rows}


def test_a_killed_run_is_marked_crashed_when_the_next_run_starts(tmp_path: Path) -> None:
    db = tmp_path / "rf.duckdb"
    killed = subprocess.run([sys.executable, "-c", KILLED.format(root=str(ROOT), db=str(db))])
    assert killed.returncode == -9
    assert _runs(db)["killed"][:2] == ("running", False)

    ResultStore(db).start_run("next", "b1", "offline", "corpus", {})
    runs = _runs(db)
    assert runs["killed"][:2] == ("crashed", True)
    assert runs["next"][:3] == ("running", False, socket.gethostname())


def test_runs_of_live_processes_and_other_hosts_are_left_running(tmp_path: Path) -> None:
    db = tmp_path / "rf.duckdb"
    store = ResultStore(db)
    store.start_run("mine", "b1", "offline", "corpus", {})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        import duckdb

        con = duckdb.connect(str(live_path(db)))
        con.execute("INSERT INTO runs (run_id, batch_id, started_at, status, host, pid) VALUES "
                    "('alive', 'b1', now(), 'running', ?, ?), "
                    "('elsewhere', 'b1', now(), 'running', 'another-host', 999999)",
                    [socket.gethostname(), sleeper.pid])
        con.close()
        store.start_run("next", "b1", "offline", "corpus", {})
        runs = _runs(db)
        assert {k: v[0] for k, v in runs.items()} == {
            "mine": "running", "alive": "running", "elsewhere": "running", "next": "running"}
    finally:
        sleeper.kill()
        sleeper.wait()
    store.finish_run("mine", "succeeded")
    assert _runs(db)["mine"][:2] == ("succeeded", True)
