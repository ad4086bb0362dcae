"""What a client outside the CLI may read from a store: reports, their search, read-only SQL.

The MCP server's tools (flows/mcp_server.py) read through here and nowhere else, so each read
goes through the store's read-only doors: `query.read_report` for a report, `query.query_readonly`
for SQL and the report list, `fulltext.search_store` for full-text search (its index is a file
of its own under the cache folder). Nothing here opens the store for writing.

    list_reports(store, limit)           newest first: id, topic, title, engine, created, citations
    report(store, report_id)             the Report (markdown with its references), or None
    search_reports(store, text, ...)     full-text hits over reports
    query(store, sql, max_rows)          (columns, rows, truncated): rows as JSON values

`query` is the CLI's read-only path (core.store.query: one query, a sandboxed connection, a
time limit): it fetches at most `max_rows` rows (MAX_ROWS at most) and says when it cut.
Values that JSON has no type for (timestamps, decimals, UUIDs, blobs) become text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.models import Report
from core.store.fulltext import Hit, Kind, index_for, search_store
from core.store.query import open_query, query_readonly, read_report

MAX_ROWS = 1_000


@dataclass(frozen=True)
class ReportSummary:
    report_id: str
    topic: str
    title: str
    engine: str
    created_at: str
    citations: int


def list_reports(store: Path, limit: int = 20) -> list[ReportSummary]:
    limit = max(1, min(int(limit), MAX_ROWS))  # an int, never text: safe to format into SQL
    _, rows = query_readonly(store, (
        "SELECT r.report_id, r.topic, r.title, r.engine, r.created_at, "
        "(SELECT count(*) FROM citations c WHERE c.report_id = r.report_id) "
        f"FROM reports r ORDER BY r.created_at DESC, r.report_id LIMIT {limit}"))
    return [ReportSummary(rid, topic or "", title or "", engine or "", _json(created) or "",
                          int(n)) for rid, topic, title, engine, created, n in rows]


def report(store: Path, report_id: str) -> Report | None:
    return read_report(store, report_id)


def search_reports(store: Path, text: str, *, cache_dir: Path, limit: int = 10,
                   kind: Kind = "reports") -> list[Hit]:
    """Reports, sources or both (`kind`) matching `text`, best first. Raises ValueError for
    text without a word to search for."""
    return search_store(store, text, index=index_for(store, cache_dir), kind=kind,
                        limit=max(1, min(int(limit), 100)))


def query(store: Path, sql: str, max_rows: int = 100, *, timeout: float = 30.0
          ) -> tuple[list[str], list[list[Any]], bool]:
    """(columns, at most max_rows rows as JSON values, whether rows were left out). Only
    max_rows + 1 rows are ever fetched, and the query stops after `timeout` seconds."""
    keep = max(1, min(int(max_rows), MAX_ROWS))
    with open_query(store, sql, timeout=timeout) as cursor:
        columns, rows = cursor.columns, cursor.fetch(keep + 1)
    return columns, [[_json(v) for v in row] for row in rows[:keep]], len(rows) > keep


def _json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID, dt.timedelta)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    return str(value)
