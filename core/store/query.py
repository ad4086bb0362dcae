"""Reading a store without ever writing to it: a user's SQL, a report, an attachment.

What it does: opens the store on a connection of its own that can only read it. DuckDB's
`read_only` alone still runs `COPY ... TO`, `ATTACH ... (READ_WRITE)`, `read_text('/any/file')`,
`SET` and `INSTALL`, so the connection is also sandboxed (`SANDBOX`): no file or network
access beyond the store itself, no extension installed or loaded on demand, no spilling to
disk, a memory limit, and its configuration locked. A user's SQL must be exactly one query
(`check_query`: SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, or EXPLAIN of one);
anything else is refused with a line naming what was refused, before it reaches DuckDB. The
statements are extracted on an empty connection locked down the same way (`_parser`):
parsing expands a PRAGMA, so it must not reach a file, the network or an extension. DuckDB's
errors reach a user as one line (`one_line`: never an internal error's stack trace). It
runs with `?` parameters, under a time limit (the connection is interrupted from a timer), and
its rows are fetched a batch at a time (`open_query`), so a million-row answer is never built
in memory unless asked for. A DuckLake target gets the same rules on its own instance.

A DuckDB file that is not a researchflow store (no schema version) is refused with one line.

`query_readonly` runs SQL and returns every row (tests, benches, the CLI's closing table);
`open_query` streams them (`researchflow query`); `read_report` and `report_usage` feed `show`
and `export`, `read_snapshot` and `read_predecessor` feed `diff`, `read_unverified` feeds
`verify`; `attached_readonly` lends the file, read-only, to another connection for the
length of a `with` block (the full-text index reads it that way).

What it does not do: create or migrate the schema (a missing file is an error, not a new store).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from core.reports.editions import Snapshot
from core.store.report_snapshots import snapshot_from
from core.models import Citation, Report
from core.store import lake, ledger
from core.store.backend import lake_target
from core.store.connection import (ReadOnlyQueryError, StoreError, _is_lock_conflict, live_path,
                                   lock_for, reading_path, release, retry_locked)
from core.store.schema import read_version
from core.store.source_versions import unverified
from core.accounting.usage import UsageTotals

MEMORY_LIMIT = "1GB"
VERSIONED_SOURCES = 13  # the schema version of source versions and ordered editions
# SET in this order once the store is open: the temp directory cannot change once external
# access is off, and nothing can change once the configuration is locked.
SANDBOX: tuple[tuple[str, str], ...] = (
    ("temp_directory", "''"),  # never spill to disk next to the store
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("memory_limit", f"'{MEMORY_LIMIT}'"),
    ("enable_external_access", "false"),  # no file but the store, no network
    ("lock_configuration", "true"),
)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?:ANALYZE\s+)?", re.IGNORECASE)
_STACK = re.compile(r"\s*Stack Trace:", re.IGNORECASE)
_ADVICE = ("Please try", "Alternatively", "INSTALL ", "LOAD ", "SET autoinstall")


def _existing(path: Path) -> Path:
    path = Path(path).expanduser().resolve()
    if not path.exists() and not live_path(path).exists():
        raise StoreError(f"no researchflow store at {path}")
    if path.is_dir():
        raise StoreError(f"{path} is a folder, not a store; pass the store's file with --db")
    return path


def _shown(path: Path) -> str:
    spec = lake_target(path)
    return lake.masked(spec) if spec is not None else str(Path(path).expanduser().resolve())


def one_line(exc: BaseException) -> str:
    """DuckDB's message without the caret picture it draws under the SQL, the advice it
    appends (INSTALL ...) or, for an internal error, its C++ stack trace (which names the
    install paths): what a user or an MCP client may read."""
    text = _STACK.split(str(exc), maxsplit=1)[0]
    if isinstance(exc, duckdb.InternalException) or text.lstrip().startswith("INTERNAL"):
        return "DuckDB failed inside (an internal error) on this statement"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = []
    for line in lines:
        if line.startswith(_ADVICE):
            break
        if not line.startswith("LINE ") and set(line) != {"^"}:
            head.append(line)
    return " ".join(head[:3]) or type(exc).__name__


def _parser() -> duckdb.DuckDBPyConnection:
    """An empty in-memory DuckDB, locked down before it parses anything: parsing expands a
    PRAGMA (import_database reads a folder's SQL, create_fts_index installs an extension), so
    the statements are extracted where no file, network or extension can be reached."""
    return duckdb.connect(":memory:", config={
        "autoinstall_known_extensions": False, "autoload_known_extensions": False,
        "enable_external_access": False, "memory_limit": "64MB", "threads": 1,
        "lock_configuration": True})


def check_query(sql: str) -> None:
    """Raise ReadOnlyQueryError unless `sql` is exactly one statement that only reads."""
    con = _parser()
    try:
        statements = con.extract_statements(sql)
    except duckdb.PermissionException as exc:
        raise ReadOnlyQueryError(f"refused: a query may read the store only ({one_line(exc)})"
                                 ) from exc
    except duckdb.Error as exc:
        raise StoreError(f"query failed: {one_line(exc)}") from exc
    finally:
        con.close()
    if len(statements) != 1:
        raise ReadOnlyQueryError(
            "no statement to run" if not statements else
            f"one statement at a time: refused {len(statements)} statements "
            f"({', '.join(s.type.name for s in statements)})")
    kind = statements[0].type
    if kind == duckdb.StatementType.EXPLAIN and _EXPLAIN.match(sql):
        try:
            check_query(_EXPLAIN.sub("", sql, count=1))
            return
        except ReadOnlyQueryError as exc:
            raise ReadOnlyQueryError(f"EXPLAIN of a statement that is not a query: {exc}") from exc
    if kind != duckdb.StatementType.SELECT:
        word = (sql.split() or [kind.name])[0].strip(";(").upper()[:20]
        raise ReadOnlyQueryError(
            f"refused {word}: queries here are read-only; only SELECT, WITH, FROM, VALUES, "
            "DESCRIBE, SHOW, SUMMARIZE and EXPLAIN run, and the store is never changed")


def sandbox(con: duckdb.DuckDBPyConnection, allowed: Sequence[str] = ()) -> None:
    """Lock `con` into reading what it has open (see SANDBOX); `allowed` folders stay
    readable (a lake's data path)."""
    if allowed:
        listed = ", ".join("'" + a.replace("'", "''") + "'" for a in allowed)
        con.execute(f"SET allowed_directories = [{listed}]")
    for name, value in SANDBOX:
        con.execute(f"SET {name} = {value}")


def _sandbox_lake(con: duckdb.DuckDBPyConnection) -> None:
    """A lake's Parquet files live under its data path, which the catalog names."""
    row = con.execute(f"SELECT value FROM ducklake_options('{lake.ALIAS}') "
                      "WHERE option_name = 'data_path'").fetchone()
    sandbox(con, allowed=[row[0]] if row and row[0] else [])


def _sandboxed_file(path: Path) -> duckdb.DuckDBPyConnection:
    """The store at path (its live file, see core.store.connection), read-only, sandboxed."""
    try:
        con = duckdb.connect(str(reading_path(path)), read_only=True, config={
            "autoinstall_known_extensions": False, "autoload_known_extensions": False})
    except duckdb.IOException as exc:
        if _is_lock_conflict(exc):
            raise
        raise StoreError(f"cannot open store {path}: {one_line(exc)}") from exc
    except duckdb.Error as exc:
        raise StoreError(f"cannot open store {path}: {one_line(exc)}") from exc
    try:
        sandbox(con)
    except BaseException:
        con.close()
        raise
    return con


def _check_ours(con: duckdb.DuckDBPyConnection, shown: str) -> None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.CatalogException:
        row = None
    if row is None:
        raise StoreError(f"{shown} is a DuckDB database but not a researchflow store (it has no "
                         "schema version); pass the store's file with --db")


@contextmanager
def readonly(path: Path, *, lock_timeout: float = 3.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A sandboxed read-only connection to an existing store for a `with` block."""
    spec = lake_target(path)
    if spec is not None:  # a DuckLake, attached READ_ONLY in an instance of its own
        with lake.backend_for(spec).read_only(prepare=_sandbox_lake) as con:
            _check_ours(con, lake.masked(spec))
            yield con
        return
    path = _existing(path)
    # The in-process lock matters: DuckDB refuses a read-only connection while this process
    # holds a read-write one to the same file.
    with lock_for(path):
        release(path)
        con = retry_locked(lambda: _sandboxed_file(path), path, lock_timeout=lock_timeout,
                           doing="opened for reading")
        try:
            _check_ours(con, str(path))
            yield con
        finally:
            con.close()


def check_target(target: Path) -> None:
    """Raise StoreError when `target` can never hold a store: a folder, a file DuckDB cannot
    open, a DuckDB database of someone else's. A missing file (a new store) and a lake pass;
    a file another process holds is taken to be a store at work."""
    spec = lake_target(target)
    if spec is not None:
        lake.check_spec(spec)  # before a password can reach Prefect's parameters
        return
    path = Path(target).expanduser().resolve()
    if path.is_dir():
        raise StoreError(f"{path} is a folder; --db takes a DuckDB file (a new one is created)")
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        con = _sandboxed_file(path)
    except duckdb.IOException as exc:
        if _is_lock_conflict(exc):
            return
        raise StoreError(f"cannot open store {path}: {one_line(exc)}") from exc
    try:
        tables = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = "
                             "current_database()").fetchone()[0]
        if tables:
            _check_ours(con, str(path))
    finally:
        con.close()


class QueryCursor:
    """The rows of a running query, a batch at a time; DuckDB's errors (the time limit
    included) arrive as StoreError."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, columns: list[str],
                 timed_out: threading.Event, timeout: float | None) -> None:
        self._cursor = cursor
        self.columns = columns
        self._timed_out = timed_out
        self._timeout = timeout

    def fetch(self, n: int) -> list[tuple[Any, ...]]:
        """Up to n more rows; [] when there are none."""
        try:
            return self._cursor.fetchmany(n)
        except duckdb.Error as exc:
            raise _translate(exc, self._timed_out, self._timeout) from exc

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while rows := self.fetch(1000):
            yield from rows


def _translate(exc: duckdb.Error, timed_out: threading.Event, timeout: float | None
               ) -> StoreError:
    if timed_out.is_set() or isinstance(exc, duckdb.InterruptException):
        return StoreError(f"the query ran past its time limit of {timeout:g} s and was stopped; "
                          "narrow it (WHERE, LIMIT) or allow more time (--timeout)")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return StoreError(f"the query needs more than {MEMORY_LIMIT} of memory; narrow it "
                          "(WHERE, LIMIT, fewer columns)")
    if "read-only" in str(exc):
        return ReadOnlyQueryError(f"refused: the store is read-only here ({one_line(exc)})")
    if isinstance(exc, duckdb.PermissionException):
        return ReadOnlyQueryError(f"refused: a query may read the store only ({one_line(exc)})")
    return StoreError(f"query failed: {one_line(exc)}")


@contextmanager
def open_query(path: Path, sql: str, params: Sequence[Any] | None = None, *,
               timeout: float | None = 30.0, lock_timeout: float = 3.0
               ) -> Iterator[QueryCursor]:
    """A user's query running on a read-only, sandboxed connection, for a `with` block.

    Refused before it runs unless it is one query (`check_query`). `timeout` (seconds, None:
    none) bounds the whole block, fetching included: past it the query is interrupted and the
    next fetch raises StoreError.
    """
    check_query(sql)
    with readonly(path, lock_timeout=lock_timeout) as con:
        timed_out = threading.Event()

        def interrupt() -> None:
            timed_out.set()
            con.interrupt()

        timer = threading.Timer(timeout, interrupt) if timeout else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            try:
                cursor = con.execute(sql, list(params) if params is not None else None)
            except duckdb.Error as exc:
                raise _translate(exc, timed_out, timeout) from exc
            columns = [d[0] for d in cursor.description] if cursor.description else []
            yield QueryCursor(cursor, columns, timed_out, timeout)
        finally:
            if timer is not None:
                timer.cancel()


def query_readonly(path: Path, sql: str, params: Sequence[Any] | None = None, *,
                   lock_timeout: float = 3.0, timeout: float | None = None
                   ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read-only query (see `open_query`): (column names, every row)."""
    with open_query(path, sql, params, timeout=timeout, lock_timeout=lock_timeout) as rows:
        return rows.columns, list(rows)


def read_report(path: Path, report_id: str, *, lock_timeout: float = 3.0) -> Report | None:
    """The stored report with its citations (ordered by number), or None for an unknown id."""
    with readonly(path, lock_timeout=lock_timeout) as con:
        try:
            row = con.execute("SELECT * FROM reports WHERE report_id = ?", [report_id]).fetchone()
            if row is None:
                return None
            report = dict(zip([d[0] for d in con.description], row))
            citations = con.execute("SELECT number, url, title, quote FROM citations "
                                    "WHERE report_id = ? ORDER BY number", [report_id]).fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"cannot read reports from {_shown(path)}: {one_line(exc)}") from exc
    return Report(
        report_id=report["report_id"], topic=report["topic"], title=report["title"] or "",
        markdown=report["markdown"], engine=report["engine"] or "",
        flags=tuple(report["flags"] or ()), language=report.get("language") or "en",
        unanswered=tuple(report.get("unanswered") or ()), created_at=report.get("created_at"),
        sections=report.get("sections") or 0,
        sections_without_evidence=report.get("sections_without_evidence") or 0,
        thin_evidence=bool(report.get("thin_evidence")),
        citations=tuple(Citation(number=n, url=url, title=title or "", quote=quote or "")
                        for n, url, title, quote in citations))


def read_snapshot(path: Path, report_id: str, *, lock_timeout: float = 3.0) -> Snapshot | None:
    """What a stored report rests on (core.reports.editions), read-only; None for an unknown id."""
    with readonly(path, lock_timeout=lock_timeout) as con:
        try:
            return snapshot_from(con, report_id)
        except duckdb.Error as exc:
            raise StoreError(f"cannot read reports from {_shown(path)}: {one_line(exc)}") from exc


def read_unverified(path: Path, report_id: str, *, lock_timeout: float = 3.0
                    ) -> tuple[int, list[dict[str, Any]]] | None:
    """(how many quotes a stored report cites, those not found in the version of the page
    they cite: core.store.source_versions `unverified`), read-only; None for an unknown id."""
    with readonly(path, lock_timeout=lock_timeout) as con:
        try:
            _at_least(con, VERSIONED_SOURCES, _shown(path), "checking quotes")
            row = con.execute("SELECT (SELECT count(*) FROM citations c WHERE c.report_id = "
                              "r.report_id) FROM reports r WHERE report_id = ?",
                              [report_id]).fetchone()
            return None if row is None else (int(row[0]), unverified(con, report_id))
        except duckdb.Error as exc:
            raise StoreError(f"cannot read citations from {_shown(path)}: {one_line(exc)}"
                             ) from exc


def read_predecessor(path: Path, report_id: str, *, lock_timeout: float = 3.0
                     ) -> tuple[str | None, bool] | None:
    """(the report of the edition before this one as the store holds it now, whether the
    report's stored "What changed" no longer compares with that report as it is: the
    `report_editions` view), read-only; None for an unknown id."""
    with readonly(path, lock_timeout=lock_timeout) as con:
        try:
            _at_least(con, VERSIONED_SOURCES, _shown(path), "ordering editions")
            row = con.execute("SELECT predecessor_report_id, stale FROM report_editions "
                              "WHERE report_id = ?", [report_id]).fetchone()
        except duckdb.Error as exc:
            raise StoreError(f"cannot read reports from {_shown(path)}: {one_line(exc)}"
                             ) from exc
    return None if row is None else (row[0], bool(row[1]))


def _at_least(con: duckdb.DuckDBPyConnection, version: int, shown: str, doing: str) -> None:
    """A read path never migrates: an older file is told how to get upgraded."""
    found = read_version(con)
    if found is not None and found < version:
        raise StoreError(f"{shown} has schema version {found}; {doing} needs {version} or "
                         "later: any run or batch writing to it upgrades it")


def report_usage(path: Path, report_id: str, *, lock_timeout: float = 3.0) -> UsageTotals:
    """What the calls of a report's topic in its batch cost (by any run), read-only."""
    with readonly(path, lock_timeout=lock_timeout) as con:
        try:
            return ledger.usage_totals(con, report_id=report_id)
        except duckdb.Error as exc:
            raise StoreError(f"cannot read the ledger of {_shown(path)}: {one_line(exc)}"
                             ) from exc


@contextmanager
def attached_readonly(con: duckdb.DuckDBPyConnection, path: Path, alias: str, *,
                      lock_timeout: float = 3.0) -> Iterator[str]:
    """The store attached to `con` as `alias`, read-only, for a `with` block; yields the alias.

    Waits up to lock_timeout for another process's write lock, like `connect`, and detaches
    (releasing the file for writers) when the block ends. A DuckDB file that is not a
    researchflow store is refused.
    """
    path = _existing(path)
    quoted = reading_path(path).as_posix().replace("'", "''")

    def attach() -> None:
        try:
            con.execute(f"ATTACH '{quoted}' AS {alias} (READ_ONLY)")
        except duckdb.IOException as exc:
            if _is_lock_conflict(exc):
                raise
            raise StoreError(f"cannot open store {path}: {one_line(exc)}") from exc
        except duckdb.Error as exc:
            raise StoreError(f"cannot open store {path}: {one_line(exc)}") from exc

    with lock_for(path):
        release(path)
        retry_locked(attach, path, lock_timeout=lock_timeout, doing="read")
        try:
            try:
                found = con.execute(
                    f"SELECT count(*) FROM duckdb_tables() WHERE database_name = '{alias}' "
                    "AND table_name = 'meta'").fetchone()[0]
            except duckdb.Error as exc:
                raise StoreError(f"cannot read {path}: {one_line(exc)}") from exc
            if not found:
                raise StoreError(f"{path} is a DuckDB database but not a researchflow store "
                                 "(it has no schema version); pass the store's file with --db")
            yield alias
        finally:
            con.execute(f"DETACH {alias}")
