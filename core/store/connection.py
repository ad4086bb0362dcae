"""Opening the store file: a connection held open while the process works, the store's exceptions.

What it does: serialises the threads of one process with a lock per resolved file path, keeps a
read-write connection open while the process works (`hold_seconds`), waits a little for another
process's lock to go away and asks it to let go (`_Wanted`), and maps DuckDB's lock and open errors into our own
exceptions (`raise ... from exc`), once, here. It also turns a cursor's rows into dicts.

What it does not do: know any table. Schema, writes and reads live in the sibling modules.

Exceptions::

    StoreError                 the store file itself went wrong (not a research failure)
    ├── StoreLockedError       another process holds the file; DuckDB's message names its PID
    ├── StoreConflictError     a DuckLake commit kept conflicting (defined in core.store.lake)
    └── ReadOnlyQueryError     a write attempted through `query_readonly`
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb

_T = TypeVar("_T")


def _spare_pandas_lookups() -> None:
    """Binding each parameter of a statement, DuckDB tries `import pandas` (to recognise a
    DataFrame). Without pandas installed every try searches sys.path again: 0.6 ms of CPU per
    8-parameter insert, thousands of inserts per batch. Recording the absence once makes the
    import fail at once, as it would anyway."""
    if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
        sys.modules["pandas"] = None  # type: ignore[assignment]


_spare_pandas_lookups()


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


# How long a writer waits for another process to let go of the file, in seconds, when its
# caller names no wait (a run's stores take RESEARCHFLOW_STORE_LOCK_TIMEOUT): an open DuckDB
# shell or a neighbour's write then delays a record instead of losing it.
LOCK_TIMEOUT = 30.0
# How long an idle read-write connection stays open for the next call, when its caller names
# no time (a run's stores take RESEARCHFLOW_STORE_HOLD_SECONDS; 0 opens a connection per call).
# Opening a DuckDB file costs tens of milliseconds (catalog read, checkpoint on close); a batch
# makes a cache call every few milliseconds, so it keeps the file open while it works and lets
# go after this much idleness. Another process that needs the file asks for it (`_Wanted`).
HOLD_SECONDS = 0.5


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


class _Wanted:
    """A sidecar file `<store>.wanted` holding the PID of a process waiting for the store.

    A process that finds the file locked writes it while it waits; a process holding the file
    open between calls sees it, closes its connection and leaves the file alone for a moment,
    so `researchflow query` gets its turn during a long batch instead of timing out.
    """

    HANDOFF_SECONDS = 0.2  # how long a holder stays away once asked

    def __init__(self, path: Path) -> None:
        self.file = path.with_name(path.name + ".wanted")

    def ask(self) -> None:
        try:
            self.file.write_text(str(os.getpid()))
        except OSError:  # a read-only folder: we simply wait without asking
            pass

    def withdraw(self) -> None:
        try:
            if self.file.read_text().strip() == str(os.getpid()):
                self.file.unlink()
        except (OSError, ValueError):
            pass

    def by_other(self) -> bool:
        """Whether a live process other than this one is waiting."""
        try:
            pid = int(self.file.read_text().strip() or 0)
        except (OSError, ValueError):
            return False
        if pid in (0, os.getpid()):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:  # a waiter that died: its request is void
            return False
        except PermissionError:
            pass
        return True


def retry_locked(open_: Callable[[], _T], path: Path, *, lock_timeout: float,
                 doing: str) -> _T:
    """open_() until another process's lock goes away, at most lock_timeout seconds.

    While waiting it asks the holder to let go (`_Wanted`). `doing` completes "so it cannot
    be ..." in the error.
    """
    deadline = time.monotonic() + lock_timeout
    wanted = _Wanted(path)
    asked = False
    try:
        while True:
            try:
                return open_()
            except duckdb.IOException as exc:
                if not _is_lock_conflict(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreLockedError(
                        f"the store {path} is held by another process, so it cannot be {doing}. "
                        f"DuckDB says: {exc}. Wait for that process (another researchflow run "
                        "or an open DuckDB shell) to finish, or stop it, then retry.") from exc
                if not asked:
                    wanted.ask()
                    asked = True
                time.sleep(0.05)  # short: a holder that was asked lets go for only a moment
    finally:
        if asked:
            wanted.withdraw()


def connect(path: Path, *, read_only: bool, lock_timeout: float) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting up to lock_timeout for another process's lock to go away.

    The caller holds `lock_for(path)`; this only deals with other processes.
    """
    def open_() -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if _is_lock_conflict(exc):
                raise
            if read_only and "does not exist" in str(exc):
                raise StoreError(f"no researchflow store at {path}") from exc
            raise StoreError(f"cannot open store {path}: {exc}") from exc

    return retry_locked(open_, path, lock_timeout=lock_timeout,
                        doing="opened for reading" if read_only else "opened for writing")


class _Held:
    """This process's open read-write connection to one file, between calls, and how long its
    last user wanted it kept while idle."""

    def __init__(self, con: duckdb.DuckDBPyConnection, hold_seconds: float) -> None:
        self.con = con
        self.hold_seconds = hold_seconds
        self.idle_since = time.monotonic()


_HELD: dict[Path, _Held] = {}
_reaper: threading.Thread | None = None


def release(path: Path) -> None:
    """Close this process's held connection to path, if any. The caller holds lock_for(path)."""
    held = _HELD.pop(path, None)
    if held is not None:
        held.con.close()


_REAPER_STOP = threading.Event()


def _reap() -> None:
    """Close connections idle for longer than they are to be held, until the process exits
    (a daemon thread)."""
    while not _REAPER_STOP.wait(0.1):
        for path in list(_HELD):
            lock = lock_for(path)
            if not lock.acquire(blocking=False):
                continue  # in use right now: not idle
            try:
                held = _HELD.get(path)
                if held and time.monotonic() - held.idle_since >= held.hold_seconds:
                    release(path)
            finally:
                lock.release()


def release_all() -> None:
    """Close every held connection of this process (the files are checkpointed and free).

    Under every file's lock, not only the held ones': a close the reaper has begun (the
    connection already out of _HELD, its checkpoint under way) is waited out too."""
    with _LOCKS_GUARD:
        paths = list(_LOCKS)
    for path in paths:
        with lock_for(path):
            release(path)


def _at_exit() -> None:
    """The reaper stopped, then every connection closed, before the interpreter finalizes.
    A daemon thread still inside DuckDB then (a close releases the GIL) is ended by Python
    when it asks for the GIL back, mid-call in DuckDB's C++: the process aborted with
    "terminate called without an active exception" (SIGABRT; duckdb/duckdb#13904): about one
    `researchflow retry` in ten, closing its idle store 0.5 s after the run's last write."""
    _REAPER_STOP.set()
    if _reaper is not None:
        _reaper.join(timeout=LOCK_TIMEOUT)
    release_all()


atexit.register(_at_exit)


def _checkout(path: Path, lock_timeout: float) -> duckdb.DuckDBPyConnection:
    """The held connection to path, or a new one. The caller holds lock_for(path)."""
    held = _HELD.get(path)
    if held is not None and _Wanted(path).by_other():
        release(path)
        # Stay away long enough for the asker's next attempt (it tries every 50 ms).
        time.sleep(_Wanted.HANDOFF_SECONDS)
        held = None
    if held is not None:
        return held.con
    return connect(path, read_only=False, lock_timeout=lock_timeout)


def _checkin(path: Path, con: duckdb.DuckDBPyConnection, hold_seconds: float) -> None:
    global _reaper
    if hold_seconds <= 0:
        _HELD.pop(path, None)
        con.close()
        return
    held = _HELD.get(path)
    if held is None or held.con is not con:
        _HELD[path] = held = _Held(con, hold_seconds)
    held.hold_seconds = hold_seconds
    held.idle_since = time.monotonic()
    if _reaper is None:
        _reaper = threading.Thread(target=_reap, name="researchflow-store-reaper", daemon=True)
        _reaper.start()


@contextmanager
def writable(path: Path, *, lock_timeout: float, hold_seconds: float = HOLD_SECONDS,
             transaction: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection for the length of a `with` block, kept open `hold_seconds` after
    it for the next call (see HOLD_SECONDS).

    The connection is this process's held one when it has one. With
    transaction=True the block runs in one transaction: committed when the block ends, rolled
    back when it raises. A connection that failed in a way DuckDB may have invalidated is
    closed rather than kept.
    """
    with lock_for(path):
        con = _checkout(path, lock_timeout)
        ok = False
        try:
            if not transaction:
                yield con
            else:
                con.execute("BEGIN TRANSACTION")
                try:
                    yield con
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            ok = True
        finally:
            if ok:
                _checkin(path, con, hold_seconds)
            else:
                _HELD.pop(path, None)
                con.close()


def dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every remaining row of an executed statement, as {column name: value}."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def one_dict(cursor: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The first row as a dict, or None when there is none."""
    rows = dicts(cursor)
    return rows[0] if rows else None
