"""A DuckLake store: the catalog in PostgreSQL, the data in Parquet files on a shared path, so
many processes on many machines write research results at once.

Target: `ducklake:<catalog>` as DuckDB's ATTACH takes it, e.g.
`ducklake:postgres:dbname=researchflow host=db.internal user=rf`. The data path (a folder every
writer mounts at the same path; an object-store URL would need DuckDB's httpfs extension, which
is not installed) is needed when the lake is created; DuckLake keeps it in the catalog, so
later attaches may leave it out. A password never goes in the target (it travels in Prefect
parameters): libpq reads PGPASSWORD or ~/.pgpass.

Offline: the `ducklake` and `postgres_scanner` extensions are LOADed from the files the pinned
duckdb-extension-* packages ship (plain INSTALL downloads); autoinstall is off.

What DuckLake lacks, and what stands in for it:

    PRIMARY KEY, UNIQUE, CHECK  tables are the file schema without them (core.store.lake_schema
                                reads it back from an in-memory DuckDB)
    ON CONFLICT, RETURNING      rewritten by core.store.dialect
    unique keys                 two transactions that both find a key missing would both insert
                                it (appends never conflict in DuckLake). So a transaction that
                                upserts, updates or deletes first bumps the one row of
                                `lake_guard`: two such transactions that overlap conflict at
                                commit, and the later one runs again on the newer snapshot
                                (not the ledger: see APPEND_ONLY)
    sequences                   not used by the store
    migrations                  additive: missing tables and columns are added, views replaced;
                                anything else is refused with a StoreError

A commit conflict (DuckLake's optimistic concurrency) reruns the whole transaction, up to
ATTEMPTS times with jittered exponential backoff (at most 1 s a wait), then raises
`StoreConflictError`.

One DuckDB instance per process and lake (loading the extensions costs ~0.5 s, attaching
~0.1 s); each call takes its own cursor, and writes of one process take turns. A restarted
PostgreSQL costs the calls made while it is down, not the instance: postgres_scanner
reconnects by itself (measured).
"""

from __future__ import annotations

import importlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from core import secrets
from core.store import dialect
from core.store.connection import StoreError
from core.store.lake_schema import GUARD, ensure, lake_schema

log = logging.getLogger("researchflow.store.lake")

PREFIX = "ducklake:"
ALIAS = "researchflow_lake"
ATTEMPTS = 25
# Tables whose keys only their writer makes (uuid call ids, written again only by the same
# process's retry): an insert-if-absent there needs no guard, so the ledger, the busiest
# writer, never waits on results or the web cache.
APPEND_ONLY = frozenset({"ledger"})
_GUARD_BUMP = f"UPDATE {GUARD} SET commits = commits + 1"
_ROWS_PER_STATEMENT = 200
_T = TypeVar("_T")


class StoreConflictError(StoreError):
    """A DuckLake commit kept conflicting with other writers after every retry."""


def masked(spec: str) -> str:
    """The target as it may be printed: no password, in either form (core.secrets)."""
    return secrets.mask_target(spec)


def check_spec(spec: str) -> None:
    """Raise StoreError when the target carries a password (`password=`, or `user:PW@` in a
    URI): a target travels in Prefect parameters, state messages and logs."""
    if secrets.target_password(spec) is not None:
        raise StoreError("keep the password out of the DuckLake target (it travels in Prefect "
                         "parameters and logs): set PGPASSWORD or use ~/.pgpass instead")


def _extension(package: str, name: str) -> str:
    try:
        module = importlib.import_module(package)
    except ImportError as exc:
        raise StoreError(f"a DuckLake store needs the {package.replace('_', '-')} package: "
                         "pip install 'researchflow[lake]'") from exc
    path = (Path(module.__file__).parent / "extensions" / f"v{duckdb.__version__}"
            / f"{name}.duckdb_extension")
    if not path.exists():
        raise StoreError(f"{package} has no {name} extension for duckdb {duckdb.__version__} "
                         f"at {path}; pin it to the duckdb version")
    return path.as_posix()


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_conflict(exc: BaseException) -> bool:
    """A commit that lost to another writer (DuckLake's, or the catalog's own key check)."""
    text = str(exc)
    return isinstance(exc, duckdb.Error) and (
        "Transaction conflict" in text or "conflicting changes" in text
        or "duplicate key value violates unique constraint" in text)


def attach(spec: str, data_path: str | None, *, read_only: bool = False
           ) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB with the lake attached as ALIAS and in use.

    Two processes that attach a lake nobody created yet race to create DuckLake's own catalog
    tables; the loser's CREATE fails on PostgreSQL's catalog, and it attaches again.
    """
    check_spec(spec)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _attach_once(spec, data_path, read_only)
        except StoreError as exc:
            cause = str(exc.__cause__ or "")
            if attempt == ATTEMPTS or "Failed to initialize DuckLake" not in cause \
                    or not ("already exists" in cause or "duplicate key" in cause):
                raise
            time.sleep(random.uniform(0.1, 0.3) * attempt)
    raise AssertionError("unreachable")


def _attach_once(spec: str, data_path: str | None, read_only: bool
                 ) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    try:
        for package, name in (("duckdb_extension_postgres_scanner", "postgres_scanner"),
                              ("duckdb_extension_ducklake", "ducklake")):
            con.execute(f"LOAD {_quote(_extension(package, name))}")
        options = [f"DATA_PATH {_quote(data_path)}"] if data_path and not read_only else []
        options += ["READ_ONLY"] if read_only else []
        con.execute(f"ATTACH {_quote(spec)} AS {ALIAS}"
                    + (f" ({', '.join(options)})" if options else ""))
        con.execute(f"USE {ALIAS}")
    except duckdb.Error as exc:
        con.close()
        raise StoreError(f"cannot open the DuckLake {masked(spec)}: {_why(exc)}") from exc
    return con


def _why(exc: duckdb.Error) -> str:
    """DuckDB's error, with what to do for the two a first run meets."""
    text = str(exc)
    if "permission denied for schema public" in text:
        # PostgreSQL 15 took CREATE on schema public from everyone but the database's owner;
        # DuckDB's text goes on with the whole CREATE TABLE, which buries this.
        return ("permission denied for schema public: the lake's role must own the database "
                "(createdb -O ROLE DBNAME, or ALTER DATABASE DBNAME OWNER TO ROLE) or hold "
                "CREATE on it (GRANT CREATE ON SCHEMA public TO ROLE, in that database)")
    if "data_path is not set" in text:
        return f"{text} (a new lake needs a data path: RESEARCHFLOW_LAKE_DATA_PATH)"
    return text


class LakeConnection:
    """A cursor that runs the store's statements in the lake's dialect. In a write transaction
    it bumps the guard before the first statement that may change a row found by its key."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, columns_of: dialect.ColumnsOf, *,
                 writing: bool) -> None:
        self._cursor = cursor
        self._columns_of = columns_of
        self._writing = writing
        self._guarded = False
        self._rows: list[tuple[Any, ...]] | None = None
        self._description: Any = None

    def _prepare(self, sql: str) -> dialect.Statement:
        statement = dialect.translate(sql, self._columns_of)
        if statement.keyed and statement.table not in APPEND_ONLY and not self._guarded:
            if not self._writing:
                raise StoreError(f"a write outside a write transaction: {sql[:80]}")
            self._cursor.execute(_GUARD_BUMP)
            self._guarded = True
        self._rows = None
        return statement

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> "LakeConnection":
        statement = self._prepare(sql)
        if statement.select is not None:
            self._cursor.execute(statement.select, statement.select_params(params))
            description, rows = self._cursor.description, self._cursor.fetchall()
            self._cursor.execute(statement.sql, params)
            self._description, self._rows = description, rows
        else:
            self._cursor.execute(statement.sql, params)
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> "LakeConnection":
        statement = self._prepare(sql)
        if statement.select is not None:
            raise dialect.DialectError("RETURNING in executemany on a DuckLake store")
        if statement.row is None:
            self._cursor.executemany(statement.sql, rows)
            return self
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            chunk = rows[start:start + _ROWS_PER_STATEMENT]
            self._cursor.execute(statement.for_rows(len(chunk)),
                                 [value for row in chunk for value in row])
        return self

    @property
    def description(self) -> Any:
        return self._description if self._rows is not None else self._cursor.description

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._rows is not None:
            rows, self._rows = self._rows, []
            return rows
        return self._cursor.fetchall()

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._rows is not None:
            return self._rows.pop(0) if self._rows else None
        return self._cursor.fetchone()


class LakeBackend:
    """One lake, shared by the threads of a process (see `backend_for`)."""

    path = None  # no file: `researchflow query --db <target>` reads a lake too

    def __init__(self, spec: str, data_path: str | None = None) -> None:
        self.spec = spec
        self.name = masked(spec)
        self.data_path = data_path
        self.conflicts = 0  # commits retried after a conflict, in this process
        self.commits = 0
        self._con: duckdb.DuckDBPyConnection | None = None
        self._pid = 0
        self._open_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._ready = False

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._open_lock:
            if self._con is None or self._pid != os.getpid():  # a forked child opens its own
                self._con = attach(self.spec, self.data_path or _default_data_path())
                self._pid = os.getpid()
            cursor = self._con.cursor()
        cursor.execute(f"USE {ALIAS}")
        return cursor

    @contextmanager
    def read(self) -> Iterator[LakeConnection]:
        """A connection for reads, in one read transaction (one snapshot for the block)."""
        cursor = self._cursor()
        try:
            cursor.execute("BEGIN TRANSACTION")
            yield LakeConnection(cursor, lake_schema().columns_of, writing=False)
            cursor.execute("COMMIT")
        finally:
            cursor.close()

    def write(self, body: Callable[[LakeConnection], _T]) -> _T:
        """body(connection) in one transaction, run again after a commit conflict."""
        with self._write_lock:
            return self._retrying(lambda cursor: body(
                LakeConnection(cursor, lake_schema().columns_of, writing=True)))

    def _retrying(self, body: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        for attempt in range(1, ATTEMPTS + 1):
            cursor = self._cursor()
            try:
                cursor.execute("BEGIN TRANSACTION")
                result = body(cursor)
                cursor.execute("COMMIT")
                self.commits += 1
                return result
            except Exception as exc:
                _rollback(cursor)
                if not is_conflict(exc):
                    raise
                if attempt == ATTEMPTS:
                    raise StoreConflictError(
                        f"the DuckLake {self.name} kept conflicting with other writers "
                        f"({ATTEMPTS} attempts): {exc}") from exc
                self.conflicts += 1
                # Full jitter: writers that lost together do not come back together.
                delay = random.uniform(0.0, min(0.05 * 2 ** (attempt - 1), 1.0))
                # INFO: the flows forward this logger to the run's Prefect log (flows.run_log).
                log.info("DuckLake commit conflicted with another writer (attempt %d of %d); "
                         "the transaction runs again in %.2f s", attempt, ATTEMPTS, delay)
                time.sleep(delay)
            finally:
                cursor.close()
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close this process's instance of the lake (a later call opens it again)."""
        with self._open_lock:
            con, self._con = self._con, None
        if con is not None:
            con.close()

    def ensure_schema(self) -> None:
        """Create the tables and views, or add what an older lake lacks (once per process)."""
        if self._ready:
            return
        with self._write_lock:
            self._retrying(lambda cursor: ensure(cursor, database=ALIAS, name=self.name))
        self._ready = True

    @contextmanager
    def read_only(self, prepare: Callable[[duckdb.DuckDBPyConnection], None] | None = None
                  ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A separate instance attached READ_ONLY, for a user's SQL (never translated).
        prepare(connection) runs once the lake is attached (core.store.query sandboxes it
        then: attaching needs the extensions and the catalog's connection)."""
        con = attach(self.spec, None, read_only=True)
        try:
            if prepare is not None:
                prepare(con)
            yield con
        finally:
            con.close()


def _rollback(cursor: duckdb.DuckDBPyConnection) -> None:
    try:
        cursor.execute("ROLLBACK")
    except duckdb.Error:
        pass  # no transaction left to roll back (a failed COMMIT ends it)


def _default_data_path() -> str | None:
    from core.settings import Settings  # read at call time, never at import

    return Settings.load().lake_data_path


_BACKENDS: dict[tuple[str, str | None], LakeBackend] = {}
_BACKENDS_GUARD = threading.Lock()


def backend_for(spec: str, data_path: str | None = None) -> LakeBackend:
    """The process's backend for one lake: its DuckDB instance is opened once and shared."""
    with _BACKENDS_GUARD:
        return _BACKENDS.setdefault((spec, data_path), LakeBackend(spec, data_path))


def close_all() -> None:
    """Close every lake instance this process opened (tasks.contexts.close, at exit)."""
    with _BACKENDS_GUARD:
        backends = list(_BACKENDS.values())
        _BACKENDS.clear()
    for backend in backends:
        backend.close()
