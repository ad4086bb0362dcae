"""Opening the store file: one short-lived DuckDB connection per call, the store's exceptions.

What it does: serialises the threads of one process with a lock per resolved file path, waits a
little for another process's lock to go away, and maps DuckDB's lock and open errors into our own
exceptions (`raise ... from exc`), once, here. It also turns a cursor's rows into dicts.

What it does not do: know any table. Schema, writes and reads live in the sibling modules.

Exceptions::

    StoreError                 the store file itself went wrong (not a research failure)
    ├── StoreLockedError       another process holds the file; DuckDB's message names its PID
    ├── StoreConflictError     a DuckLake commit kept conflicting (defined in core.store.lake)
    └── ReadOnlyQueryError     a write attempted through `query_readonly`
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb


class StoreError(Exception):
    """Something about the store file itself went wrong (not a research failure)."""


class StoreLockedError(StoreError):
    """Another process holds the DuckDB file; DuckDB's message names its PID."""


class ReadOnlyQueryError(StoreError):
    """A statement tried to change data through the read-only query path."""


# One lock per resolved file path: threads of one process take turns; DuckDB handles processes.
# It matters for readers too: DuckDB refuses a read-only connection while this process holds a
# read-write one to the same file.
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def lock_for(path: Path) -> threading.Lock:
    """The in-process lock for one resolved file path."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


def lock_wait() -> float:
    """How long a writer waits for another process to let go of the file, in seconds.

    A run records its outcome through this wait, so an open DuckDB shell or a neighbour's
    write delays the record instead of losing it (RESEARCHFLOW_STORE_LOCK_TIMEOUT, default 30).
    """
    try:
        return max(0.0, float(os.environ.get("RESEARCHFLOW_STORE_LOCK_TIMEOUT", "30")))
    except ValueError:
        return 30.0


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def connect(path: Path, *, read_only: bool, lock_timeout: float) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting up to lock_timeout for another process's lock to go away.

    The caller holds `lock_for(path)`; this only deals with other processes.
    """
    deadline = time.monotonic() + lock_timeout
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if not _is_lock_conflict(exc):
                if read_only and "does not exist" in str(exc):
                    raise StoreError(f"no researchflow store at {path}") from exc
                raise StoreError(f"cannot open store {path}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"the store {path} is held by another process, so it cannot be opened "
                    f"{'for reading' if read_only else 'for writing'}. DuckDB says: {exc}. "
                    "Wait for that process (another researchflow run or an open DuckDB shell) "
                    "to finish, or stop it, then retry.") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@contextmanager
def writable(path: Path, *, lock_timeout: float, transaction: bool = False
             ) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection for the length of a `with` block, closed afterwards.

    With transaction=True the block runs in one transaction: committed when the block ends,
    rolled back when it raises.
    """
    with lock_for(path):
        con = connect(path, read_only=False, lock_timeout=lock_timeout)
        try:
            if not transaction:
                yield con
                return
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()


def dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every remaining row of an executed statement, as {column name: value}."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def one_dict(cursor: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The first row as a dict, or None when there is none."""
    rows = dicts(cursor)
    return rows[0] if rows else None
