"""MemoStore: the call memo's table (`call_memo`) in a DuckDB file or a DuckLake.

What it does: reads the answers stored under some fingerprints while they are fresh, and
upserts answers (a newer answer to the same request replaces the older one). The table lives in
the store, so every worker, process and machine writing to one store shares it.

What it does not do: compute fingerprints or decide what is an answer (core.accounting.memo does),
or ever fail its caller: a store that is locked or broken costs only the memo (a read is a miss, a
write is kept by core.accounting.memo and tried again), said at the 1st, 2nd, 4th... failure in
a row and when it answers again. Between tries it is left alone for a pause that grows
(core.accounting.batches.Backoff).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from core.accounting.batches import Backoff, Patience
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
        self._state = threading.Lock()
        self._ready = False
        # After a failure reads leave the store alone for `retry_after` seconds, then longer.
        patience = Patience(first_retry=retry_after, max_retry=max(retry_after, 60.0))
        self._refusals = Backoff(patience)

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
            # A read in the pause is a miss, at once: it is on a call's path. A write is tried
            # whenever the memo's writer asks: its own pause has passed (core.accounting.batches).
            if reading and self._refusals.pausing():
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
                loud = self._refusals.refused()
                pause = self._refusals.pause
            (log.warning if loud else log.debug)(
                "call memo: could not %s in %s (%s); calls are made meanwhile, and reads "
                "leave the store alone for %g s", what, self.backend.name, exc, pause)
            return None
        with self._state:
            refusals, seconds = self._refusals.answered()
        if refusals:
            log.info("call memo: %s answers again after %d failure(s) over %.0f s",
                     self.backend.name, refusals, seconds)
        return done
