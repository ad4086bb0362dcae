"""Model limits that provider errors taught (`model_limits`), read and remembered.

What it does: functions over an open connection that `ResultStore` calls: upsert what was learned
for a model (a window replaces the old one, as the provider's newest number is the truth; a
per-request budget keeps the smallest seen) and read them all back.

What it does not do: decide what a limit is (core.overflow.windows does) or hold any state.
"""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb

from core.store.connection import dicts

FIELDS = ("context_window", "max_output", "request_budget")


def remember(con: duckdb.DuckDBPyConnection, model: str, *, context_window: int | None = None,
             max_output: int | None = None, request_budget: int | None = None) -> None:
    con.execute(
        "INSERT INTO model_limits VALUES (?, ?, ?, ?, ?) ON CONFLICT (model) DO UPDATE SET "
        "context_window = coalesce(excluded.context_window, model_limits.context_window), "
        "max_output = coalesce(excluded.max_output, model_limits.max_output), "
        "request_budget = CASE WHEN excluded.request_budget IS NULL "
        "THEN model_limits.request_budget WHEN model_limits.request_budget IS NULL "
        "THEN excluded.request_budget "
        "ELSE least(excluded.request_budget, model_limits.request_budget) END, "
        "updated_at = excluded.updated_at",
        [model, context_window, max_output, request_budget, datetime.now(timezone.utc)])


def remembered(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, int]]:
    """model -> {field: tokens} for the fields that are known."""
    rows = dicts(con.execute(f"SELECT model, {', '.join(FIELDS)} FROM model_limits"))
    return {r["model"]: {f: int(r[f]) for f in FIELDS if r[f] is not None} for r in rows}
