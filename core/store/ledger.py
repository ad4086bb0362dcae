"""The usage ledger in DuckDB: writing `CallRecord` rows and summing them into `UsageTotals`.

What it does: functions over an open connection that `ResultStore` calls inside its own
connection (and, for writes, transaction): insert records idempotently by call_id, each with
its kind (`kind_of`: llm, search, served or fallback), total them under any mix of filters,
and sum one run's spend. The table is `ledger`; the view `llm_calls` shows its kind 'llm'.

What it does not do: decide when a call is recorded or what it cost (a `CallRecord` arrives
priced), open the file, or ever delete a row: a rerun of a topic replaces its report but not the
calls that were paid for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Literal

import duckdb

from core.secrets import mask
from core.store.connection import one_dict
from core.store.schema import USAGE_COLUMNS
from core.accounting.usage import CallRecord, UsageTotals

# The table's columns are the dataclass's fields, by name: a new field without a migration
# fails loudly here instead of being dropped.
_COLUMNS = tuple(f.name for f in fields(CallRecord))
_ROW = f"({', '.join('?' for _ in range(len(_COLUMNS) + 1))})"
_INSERT = (f"INSERT INTO ledger ({', '.join(_COLUMNS)}, kind) VALUES {{rows}} "
           "ON CONFLICT (call_id) DO NOTHING")

Kind = Literal["llm", "search", "served", "fallback"]


def kind_of(record: CallRecord) -> Kind:
    """What a ledger row is: a repeat the call memo served (at $0, a search or an LLM call), a
    role the extractive engine answered for a model (not a call), a search, or an LLM call.
    The same rule fills the kind of rows stored before it existed (core.store.migrations)."""
    if record.outcome == "served":
        return "served"
    if record.outcome == "fallback":
        return "fallback"
    return "search" if record.role == "search" else "llm"
_ROWS_PER_STATEMENT = 100


def insert_calls(con: duckdb.DuckDBPyConnection, records: Sequence[CallRecord]) -> None:
    """Insert the records; a call_id already stored is left as it was (a retried write)."""
    rows = list({r.call_id: [_stored(name, getattr(r, name)) for name in _COLUMNS]
                 + [kind_of(r)] for r in records}.values())  # one row per key, as an upsert takes
    if not rows:
        return
    if not isinstance(con, duckdb.DuckDBPyConnection):  # a lake: executemany writes chunks
        con.executemany(_INSERT.format(rows=_ROW), rows)
        return
    # A file: one statement per chunk; executemany costs DuckDB ~10 ms of CPU a row here,
    # a batch's worth of the ledger's writes every half second.
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        chunk = rows[start:start + _ROWS_PER_STATEMENT]
        con.execute(_INSERT.format(rows=", ".join([_ROW] * len(chunk))),
                    [value for row in chunk for value in row])


def _stored(column: str, value: object) -> object:
    # An error text may quote what a provider sent back, a key included.
    return mask(value) if column == "error" and isinstance(value, str) else value


def usage_totals(con: duckdb.DuckDBPyConnection, *, run_id: str | None = None,
                 batch_id: str | None = None, topic_id: str | None = None,
                 report_id: str | None = None) -> UsageTotals:
    """Totals over the ledger rows matching every filter given; no filter: the whole ledger.

    report_id selects the calls of that report's topic in that report's batch (whichever run
    made them); an unknown report_id matches nothing and gives zero totals.
    """
    where: list[str] = []
    params: list[str] = []
    for column, value in (("run_id", run_id), ("batch_id", batch_id), ("topic_id", topic_id)):
        if value is not None:
            where.append(f"l.{column} = ?")
            params.append(value)
    if report_id is not None:
        where.append("EXISTS (SELECT 1 FROM reports r WHERE r.report_id = ? "
                     "AND r.topic_id = l.topic_id AND r.batch_id = l.batch_id)")
        params.append(report_id)
    sql = f"SELECT {USAGE_COLUMNS} FROM ledger l"
    if where:
        sql += " WHERE " + " AND ".join(where)
    row = one_dict(con.execute(sql, params))
    assert row is not None  # an aggregate without GROUP BY always returns one row
    return UsageTotals(**row)


def spent_usd(con: duckdb.DuckDBPyConnection, *, run_id: str, topic_id: str | None = None
              ) -> float:
    """Known cost of one run (or of one topic within it); unpriced calls count as 0."""
    sql = "SELECT coalesce(sum(cost_usd), 0)::DOUBLE FROM ledger WHERE run_id = ?"
    params = [run_id]
    if topic_id is not None:
        sql += " AND topic_id = ?"
        params.append(topic_id)
    row = con.execute(sql, params).fetchone()
    return float(row[0]) if row else 0.0
