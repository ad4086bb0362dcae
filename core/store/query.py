"""Ad-hoc read-only SQL over a store file, for `researchflow query` and for tests.

What it does: opens the file with read_only=True, so DuckDB itself refuses INSERT/UPDATE/DROP,
and translates that refusal into `ReadOnlyQueryError` with a plain sentence. It may run while
another terminal's researchflow is between writes.

What it does not do: create or migrate the schema (a missing file is an error, not a new store).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from core.store.connection import ReadOnlyQueryError, StoreError, connect, lock_for


def query_readonly(path: Path, sql: str, *, lock_timeout: float = 3.0
                   ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run a user's SQL on a read-only connection: (column names, rows)."""
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise StoreError(f"no researchflow store at {path}")
    # The in-process lock matters: DuckDB refuses a read-only connection while this process
    # holds a read-write one to the same file.
    with lock_for(path):
        con = connect(path, read_only=True, lock_timeout=lock_timeout)
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            rows = cursor.fetchall() if cursor.description else []
        except duckdb.Error as exc:
            if "read-only mode" in str(exc):
                raise ReadOnlyQueryError(
                    f"queries on {path} are read-only; this statement tries to change data and "
                    f"was refused ({exc})") from exc
            raise StoreError(f"query failed: {exc}") from exc
        finally:
            con.close()
    return columns, rows
