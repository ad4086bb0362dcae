"""Opening the store file: a connection held open while the process works, the store's exceptions.

What it does: serialises the threads of one process with a lock per resolved file path, keeps a
read-write connection open while the process works (`hold_seconds`), waits a little for another
process's lock to go away and asks it to let go (`_Wanted`), and maps DuckDB's lock and open errors into our own
exceptions (`raise ... from exc`), once, here. It also turns a cursor's rows into dicts.

Two files make a store (ARCHITECTURE.md, "The store"): researchflow writes and reads
`<store>.live` (`live_path`), and publishes a checkpointed copy of it at the store's own path
(`publish`: copied, then renamed into place) at most every `PUBLISH_SECONDS` while a process
writes and when it lets go. The store's path is the analysts' file: no researchflow process
ever opens it, so `duckdb -readonly researchflow.duckdb` or a notebook's read-only connection
never meets a batch's lock, and a batch never meets theirs. A store written by an earlier
version (only the store's path) becomes the live file the first time it is written
(`_adopt`).

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
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb

_T = TypeVar("_T")
log = logging.getLogger(__name__)


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


# How often, at most, a writing process publishes the store's read copy while it keeps writing,
# in seconds: what an analyst's new connection sees mid-batch is at most about this old (and
# the copy costs a close and a file copy, ~40 ms for a 12 MB store).
PUBLISH_SECONDS = 5.0


def live_path(path: Path) -> Path:
    """The file researchflow writes for the store at path (see the module's docstring)."""
    return path.with_name(path.name + ".live")


def reading_path(path: Path) -> Path:
    """The file researchflow reads for the store at path: the live file, or the store's own
    path for a store no version of researchflow with a live file has written yet."""
    live = live_path(path)
    return live if live.exists() else path


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


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
        file = reading_path(path) if read_only else _adopt(path, lock_timeout)
        try:
            return duckdb.connect(str(file), read_only=read_only)
        except duckdb.IOException as exc:
            if _is_lock_conflict(exc):
                raise
            if read_only and "does not exist" in str(exc):
                raise StoreError(f"no researchflow store at {path}") from exc
            raise StoreError(f"cannot open store {path}: {exc}") from exc

    return retry_locked(open_, path, lock_timeout=lock_timeout,
                        doing="opened for reading" if read_only else "opened for writing")


def _adopt(path: Path, lock_timeout: float) -> Path:
    """The live file, made from the store's own file when only that exists (a store an earlier
    version wrote, or one copied in by hand). The caller holds lock_for(path).

    The copy is linked into place only if no other process made the live file meanwhile."""
    live = live_path(path)
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a store; pass the store's file")
    if live.exists() or not path.exists() or path.stat().st_size == 0:
        return live
    wal = path.with_name(path.name + ".wal")
    if wal.exists() and wal.stat().st_size:  # not checkpointed: opening and closing does it
        retry_locked(lambda: duckdb.connect(str(path)).close(), path,
                     lock_timeout=lock_timeout, doing="opened for writing")
    tmp = path.with_name(f"{path.name}.live.{os.getpid()}.tmp")
    shutil.copyfile(path, tmp)
    try:
        os.link(tmp, live)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    return live


def stale(path: Path) -> bool:
    """Whether the live file holds what the store's read copy does not (yet)."""
    live = _stamp(live_path(path))
    return live is not None and live != _stamp(path)


def publish(path: Path) -> bool:
    """Copy the live file to the store's path, if it changed since its last copy; whether it
    was copied. The caller holds lock_for(path) and no connection of this process is open.

    A read-only connection to the live file keeps writers out while its bytes are copied
    (readers may stay), so the copy is one checkpointed state; it gets the live file's
    modification time (`stale` compares them) and is renamed over the store's path: a reader
    that has the old copy open keeps reading it, a new one opens the new copy. A live file
    another process is writing is left to that process, which publishes when it lets go.
    """
    live = live_path(path)
    if not stale(path):
        return False
    try:
        wal = live.with_name(live.name + ".wal")
        if wal.exists() and wal.stat().st_size:  # a writer that died: checkpoint what it left
            duckdb.connect(str(live)).close()
        con = duckdb.connect(str(live), read_only=True)
    except duckdb.IOException as exc:
        if _is_lock_conflict(exc):
            return False
        raise StoreError(f"cannot open store {live}: {exc}") from exc
    tmp = path.with_name(f"{path.name}.{os.getpid()}.publishing")
    try:
        st = live.stat()
        shutil.copyfile(live, tmp)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot publish the store's read copy {path}: {exc}") from exc
    finally:
        con.close()
    return True


def publish_now(path: Path) -> bool:
    """Let go of this process's connection to the store at path and publish its read copy
    (see `publish`); for a caller that wants an analyst to see what it just wrote."""
    with lock_for(path):
        release(path)
        return publish(path)


class _Held:
    """This process's open read-write connection to one file, between calls, and how long its
    last user wanted it kept while idle."""

    def __init__(self, con: duckdb.DuckDBPyConnection, hold_seconds: float) -> None:
        self.con = con
        self.hold_seconds = hold_seconds
        self.idle_since = time.monotonic()


_HELD: dict[Path, _Held] = {}
_reaper: threading.Thread | None = None
# Files this process wrote (or may have), and when it last published each (monotonic).
_WRITTEN: set[Path] = set()
_PUBLISHED: dict[Path, float] = {}
# How long each store's last copy took: a busy writer publishes at most every 20 times that
# (so a large store's copies take at most ~5% of its time), and never more often than
# PUBLISH_SECONDS.
_COPY_SECONDS: dict[Path, float] = {}


def release(path: Path) -> None:
    """Close this process's held connection to path, if any. The caller holds lock_for(path)."""
    held = _HELD.pop(path, None)
    if held is not None:
        held.con.close()


_REAPER_STOP = threading.Event()


def _try_publish(path: Path) -> None:
    """publish(path), a failure logged rather than raised (the reaper and exit call it: a read
    copy that could not be made must not end the process; the next try makes it)."""
    started = time.monotonic()
    try:
        if publish(path):
            _COPY_SECONDS[path] = time.monotonic() - started
    except (StoreError, duckdb.Error) as exc:
        log.warning("%s", exc)


def _logged(path: Path) -> bool:
    """Whether the live file's write-ahead log holds writes its file does not (yet): a held
    connection that only read is not closed to publish nothing."""
    stamp = _stamp(live_path(path).with_name(live_path(path).name + ".wal"))
    return bool(stamp and stamp[0])


def _reap() -> None:
    """Close connections idle for longer than they are to be held, and publish the read copy of
    what this process wrote (at most every PUBLISH_SECONDS while it keeps writing, and every 20
    times its last copy's length), until the process exits (a daemon thread)."""
    while not _REAPER_STOP.wait(0.1):
        for path in list(_WRITTEN):
            lock = lock_for(path)
            if not lock.acquire(blocking=False):
                continue  # in use right now: not idle
            try:
                now = time.monotonic()
                since = now - _PUBLISHED.get(path, 0.0)
                copying = 20 * _COPY_SECONDS.get(path, 0.0)
                held = _HELD.get(path)
                if held and (now - held.idle_since >= held.hold_seconds
                             or (since >= max(PUBLISH_SECONDS, copying) and _logged(path))):
                    release(path)
                # publish() only copies what changed
                if path not in _HELD and since >= max(0.5, copying):
                    _PUBLISHED[path] = now
                    _try_publish(path)
            finally:
                lock.release()


def release_all() -> None:
    """Close every held connection of this process (the files are checkpointed and free), and
    publish the read copy of every store it wrote.

    Under every file's lock, not only the held ones': a close the reaper has begun (the
    connection already out of _HELD, its checkpoint under way) is waited out too."""
    with _LOCKS_GUARD:
        paths = list(_LOCKS)
    for path in paths:
        with lock_for(path):
            release(path)
            if path in _WRITTEN:
                _try_publish(path)


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
    _WRITTEN.add(path)
    if hold_seconds <= 0:
        _HELD.pop(path, None)
        con.close()
    else:
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
                _WRITTEN.add(path)
                con.close()


def dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every remaining row of an executed statement, as {column name: value}."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def one_dict(cursor: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The first row as a dict, or None when there is none."""
    rows = dicts(cursor)
    return rows[0] if rows else None
