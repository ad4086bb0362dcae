"""The `runs` table: a run is 'running' while its process lives, then 'succeeded', 'failed' or,
when its process was killed before it could say, 'crashed'.

Each run records the host and PID of the process running it. Starting any run on a host marks
that host's runs whose process no longer exists as crashed, so a run killed with SIGKILL (or by
a reboot) does not stay 'running' forever. Runs of other hosts are left to their own hosts.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timezone

import duckdb


def start(con: duckdb.DuckDBPyConnection, run_id: str, batch_id: str, engine: str,
          search_backend: str, settings_json: str) -> None:
    """Record a run as running in this process (again, for a retry of the same run id)."""
    host, pid = socket.gethostname(), os.getpid()
    mark_crashed(con, host)
    con.execute(
        "INSERT INTO runs (run_id, batch_id, started_at, finished_at, status, engine, "
        "search_backend, settings_json, host, pid) VALUES (?, ?, ?, NULL, 'running', ?, ?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET status = 'running', finished_at = NULL, "
        "engine = excluded.engine, search_backend = excluded.search_backend, "
        "settings_json = excluded.settings_json, host = excluded.host, pid = excluded.pid",
        [run_id, batch_id, _now(), engine, search_backend, settings_json, host, pid])


def finish(con: duckdb.DuckDBPyConnection, run_id: str, status: str) -> bool:
    """Mark a run finished; False when there is no such run."""
    return bool(con.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ? "
                            "RETURNING run_id", [status, _now(), run_id]).fetchall())


def mark_crashed(con: duckdb.DuckDBPyConnection, host: str) -> list[str]:
    """Mark this host's running runs whose process is gone as crashed; returns their ids."""
    rows = con.execute("SELECT run_id, pid FROM runs WHERE status = 'running' AND host = ? "
                       "AND pid IS NOT NULL", [host]).fetchall()
    gone = [run_id for run_id, pid in rows if pid != os.getpid() and not _alive(pid)]
    if gone:
        con.execute("UPDATE runs SET status = 'crashed', finished_at = ? "
                    "WHERE run_id IN (SELECT unnest(?))", [_now(), gone])
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _now() -> datetime:
    return datetime.now(timezone.utc)
