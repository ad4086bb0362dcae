"""Where a store lives: one DuckDB file (the default) or a DuckLake (core.store.lake).

A store target is a file's path, or `ducklake:<catalog>` for a lake. `open_backend` tells them
apart; the stores (`ResultStore`, `PageStore`) then talk to either through the same three
methods, and write the same SQL (a lake rewrites what it lacks, see core.store.dialect):

    ensure_schema()   create or upgrade the schema
    read()            a connection for reads, for a `with` block
    write(body)       body(connection) in one transaction; its result is returned. A lake runs
                      it again after a commit conflict, so a body must only touch the database

What it does not do: write SQL of its own (the stores do), or manage connections (a file's
are core.store.connection's: held open while the process works).

Only a target that starts with `ducklake:` is a lake: `./ducklake:dir/x.duckdb` (made absolute by
the CLI) and `/data/ducklake:2024/x.duckdb` are files. A caller must not resolve a lake's target
into a path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import duckdb

from core.store import lake
from core.store.connection import HOLD_SECONDS, publish_now, writable
from core.store.schema import ensure_schema

_T = TypeVar("_T")


class Backend(Protocol):
    name: str  # what messages call it (a lake's password never shows)
    path: Path | None  # the file, None for a lake

    def ensure_schema(self) -> None: ...

    def read(self) -> AbstractContextManager[Any]: ...

    def write(self, body: Callable[[Any], _T]) -> _T: ...


def lake_target(target: str | Path) -> str | None:
    """The `ducklake:` target named by target, or None when it names a file."""
    text = str(target)
    return text if text.startswith(lake.PREFIX) else None


def open_backend(target: str | Path, *, lock_timeout: float, hold_seconds: float = HOLD_SECONDS,
                 data_path: str | None = None) -> Backend:
    """The backend for a target; a lake's is shared by the process (one DuckDB instance).
    A file's connections wait `lock_timeout` for another process and stay open `hold_seconds`
    while idle; `data_path` is where a new lake keeps its Parquet files."""
    spec = lake_target(target)
    if spec is not None:
        return lake.backend_for(spec, data_path)
    return FileBackend(Path(target), lock_timeout=lock_timeout, hold_seconds=hold_seconds)


class FileBackend:
    """A DuckDB file: one writing process at a time, through core.store.connection."""

    def __init__(self, path: Path, *, lock_timeout: float,
                 hold_seconds: float = HOLD_SECONDS) -> None:
        self.path = Path(path).expanduser().resolve()
        self.name = str(self.path)
        self.lock_timeout = lock_timeout
        self.hold_seconds = hold_seconds

    def ensure_schema(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with writable(self.path, lock_timeout=self.lock_timeout, hold_seconds=self.hold_seconds,
                      transaction=True) as con:
            ensure_schema(con, self.path)
        if not self.path.exists():  # a new store: the analysts' copy exists from the start
            publish_now(self.path)

    @contextmanager
    def read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        # Read-write on purpose: DuckDB refuses a read-only connection to a file this process
        # holds read-write, and the per-file lock already keeps this process's calls in turn.
        with writable(self.path, lock_timeout=self.lock_timeout,
                      hold_seconds=self.hold_seconds) as con:
            yield con

    def write(self, body: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        with writable(self.path, lock_timeout=self.lock_timeout, hold_seconds=self.hold_seconds,
                      transaction=True) as con:
            return body(con)
