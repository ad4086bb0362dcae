"""MemoStore: the call memo's table (`call_memo`) in a DuckDB file or a DuckLake.

What it does: reads the answers stored under some fingerprints while they are fresh, and
upserts answers (a newer answer to the same request replaces the older one). The table lives in
the store, so every worker, process and machine writing to one store shares it.

What it does not do: compute fingerprints or decide what is an answer (core.accounting.memo does),
or ever fail its caller: a store that is locked or broken costs only the memo (a read is a miss, a
write is kept by core.accounting.memo and tried again), with one warning per outage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from core.accounting.memo import MemoRow
from core.store.backend import open_backend
from core.store.connection import HOLD_SECONDS, StoreError

log = logging.getLogger("researchflow.store.memo")
_T = TypeVar("_T")
_ROWS_PER_STATEMENT = 200


class MemoStore:
    """The `call_memo` table of one store target. Safe to share between threads."""

    def __init__(self, path: Path | str, *, lock_timeout: float = 5.0,
                 hold_seconds: float = HOLD_SECONDS, retry_after: float = 10.0) -> None:
        self.backend = open_backend(path, lock_timeout=lock_timeout, hold_seconds=hold_seconds)
        self.retry_after = retry_after
        self._state = threading.Lock()
        self._ready = False
        self._paused_until = 0.0
        self._warned = False

    def fingerprints(self, since: datetime) -> set[str] | None:
        """Every fingerprint stored at or after `since` (one read, so a call that was never
        made costs no read of its own); None: unreadable."""
        def read(con: duckdb.DuckDBPyConnection) -> set[str]:
            rows = con.execute("SELECT fingerprint FROM call_memo WHERE created_at >= ?",
                               [since]).fetchall()
            return {str(key) for (key,) in rows}

        return self._attempt("read the call memo", read, reading=True)

    def answers(self, fingerprints: Sequence[str], since: datetime) -> dict[str, str] | None:
        """fingerprint -> answer for those stored at or after `since`; None: unreadable."""
        if not fingerprints:
            return {}
        marks = ", ".join("?" for _ in fingerprints)

        def read(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
            rows = con.execute(f"SELECT fingerprint, answer FROM call_memo WHERE fingerprint "
                               f"IN ({marks}) AND created_at >= ?",
                               [*fingerprints, since]).fetchall()
            return {str(key): str(answer) for key, answer in rows}

        return self._attempt("read the call memo", read, reading=True)

    def keep(self, rows: Sequence[MemoRow]) -> bool:
        """Store (or replace) the rows in one transaction; whether it worked."""
        if not rows:
            return True

        latest = {row.fingerprint: row for row in rows}  # one row per key, as upserts take
        values = [[r.fingerprint, r.kind, r.provider, r.model, r.role, r.answer, r.created_at]
                  for r in latest.values()]
        upsert = ("INSERT INTO call_memo VALUES {rows} ON CONFLICT (fingerprint) DO UPDATE SET "
                  "answer = excluded.answer, created_at = excluded.created_at")
        one = "(?, ?, ?, ?, ?, ?, ?)"

        def write(con: duckdb.DuckDBPyConnection) -> bool:
            if self.backend.path is None:  # a lake: executemany writes its rows in chunks
                con.executemany(upsert.format(rows=one), values)
                return True
            # A file: one statement for the batch (an upsert statement costs ~5 ms a row).
            for start in range(0, len(values), _ROWS_PER_STATEMENT):
                chunk = values[start:start + _ROWS_PER_STATEMENT]
                con.execute(upsert.format(rows=", ".join([one] * len(chunk))),
                            [v for row in chunk for v in row])
            return True

        return bool(self._attempt("write the call memo", write))

    def _attempt(self, what: str, body: Callable[[duckdb.DuckDBPyConnection], _T], *,
                 reading: bool = False) -> _T | None:
        with self._state:
            if time.monotonic() < self._paused_until:
                return None
        try:
            if not self._ready:
                self.backend.ensure_schema()
                self._ready = True
            if reading:
                with self.backend.read() as con:
                    done = body(con)
            else:
                done = self.backend.write(body)
        except (StoreError, duckdb.Error, OSError) as exc:
            with self._state:
                self._paused_until = time.monotonic() + self.retry_after
                first, self._warned = not self._warned, True
            (log.warning if first else log.debug)(
                "call memo: could not %s in %s (%s); calls are made meanwhile", what,
                self.backend.name, exc)
            return None
        with self._state:  # the next outage is said again, once
            back, self._warned = self._warned, False
        if back:
            log.info("call memo: %s answers again", self.backend.name)
        return done
