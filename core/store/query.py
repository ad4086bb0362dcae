"""Reading a store file without ever writing to it: a user's SQL, a report, an attachment.

What it does: opens the file with read_only=True, so DuckDB itself refuses INSERT/UPDATE/DROP,
and translates that refusal into `ReadOnlyQueryError` with a plain sentence. It may run while
another terminal's researchflow is between writes. `query_readonly` runs `researchflow query`;
`read_report` feeds `researchflow export`; `attached_readonly` lends the file, read-only, to
another connection for the length of a `with` block (the full-text index reads it that way).

What it does not do: create or migrate the schema (a missing file is an error, not a new store).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from core.models import Citation, Report
from core.store import lake
from core.store.backend import lake_target
from core.store.connection import (ReadOnlyQueryError, StoreError, _is_lock_conflict, connect,
                                   lock_for, release, retry_locked)


def _existing(path: Path) -> Path:
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise StoreError(f"no researchflow store at {path}")
    return path


def _shown(path: Path) -> str:
    spec = lake_target(path)
    return lake.masked(spec) if spec is not None else str(_existing(path))


@contextmanager
def readonly(path: Path, *, lock_timeout: float = 3.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to an existing store for a `with` block, closed afterwards."""
    spec = lake_target(path)
    if spec is not None:  # a DuckLake, attached READ_ONLY in an instance of its own
        with lake.backend_for(spec).read_only() as con:
            yield con
        return
    path = _existing(path)
    # The in-process lock matters: DuckDB refuses a read-only connection while this process
    # holds a read-write one to the same file.
    with lock_for(path):
        release(path)  # DuckDB refuses read-only while this process holds it read-write
        con = connect(path, read_only=True, lock_timeout=lock_timeout)
        try:
            yield con
        finally:
            con.close()


def query_readonly(path: Path, sql: str, *, lock_timeout: float = 3.0
                   ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run a user's SQL on a read-only connection: (column names, rows)."""
    with readonly(path, lock_timeout=lock_timeout) as con:
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            rows = cursor.fetchall() if cursor.description else []
        except duckdb.Error as exc:
            if "read-only mode" in str(exc):
                raise ReadOnlyQueryError(
                    f"queries on {_shown(path)} are read-only; this statement tries to "
                    f"change data and was refused ({exc})") from exc
            raise StoreError(f"query failed: {exc}") from exc
    return columns, rows


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
        except duckdb.Error as exc:  # e.g. a DuckDB file that is not a researchflow store
            raise StoreError(f"cannot read reports from {path}: {exc}") from exc
    return Report(
        report_id=report["report_id"], topic=report["topic"], title=report["title"] or "",
        markdown=report["markdown"], engine=report["engine"] or "",
        flags=tuple(report["flags"] or ()), language=report.get("language") or "en",
        citations=tuple(Citation(number=n, url=url, title=title or "", quote=quote or "")
                        for n, url, title, quote in citations))


@contextmanager
def attached_readonly(con: duckdb.DuckDBPyConnection, path: Path, alias: str, *,
                      lock_timeout: float = 3.0) -> Iterator[str]:
    """The store attached to `con` as `alias`, read-only, for a `with` block; yields the alias.

    Waits up to lock_timeout for another process's write lock, like `connect`, and detaches
    (releasing the file for writers) when the block ends.
    """
    path = _existing(path)
    quoted = path.as_posix().replace("'", "''")

    def attach() -> None:
        try:
            con.execute(f"ATTACH '{quoted}' AS {alias} (READ_ONLY)")
        except duckdb.IOException as exc:
            if _is_lock_conflict(exc):
                raise
            raise StoreError(f"cannot open store {path}: {exc}") from exc

    with lock_for(path):
        release(path)
        retry_locked(attach, path, lock_timeout=lock_timeout, doing="read")
        try:
            yield alias
        finally:
            con.execute(f"DETACH {alias}")
