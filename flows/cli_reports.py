"""Commands that read the store: show a report, run read-only SQL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markdown import Markdown
from rich.table import Table

from flows.console import DbOpt, db_path, err, fail, out


def show(report_id: str, db: Optional[Path] = DbOpt,
         raw: bool = typer.Option(False, help="Print the markdown source.")) -> None:
    """Print a stored report."""
    from core.store import ResultStore, StoreError

    path = db_path(db)
    if not path.exists():
        fail(f"no store at {path}; run `researchflow run TOPIC` or pass --db")
    try:
        report = ResultStore(path).get_report(report_id)
    except StoreError as exc:
        fail(str(exc))
    if report is None:
        fail(f"no report {report_id!r} in {path}; list them with: researchflow query "
              "\"SELECT report_id, topic FROM reports\"")
    if raw:
        sys.stdout.write(report["markdown"])
    else:
        out.print(Markdown(report["markdown"]))
    (err if raw else out).print(report["usage"].line().replace("usage:", "cost of this report:", 1))


def query(sql: str, db: Optional[Path] = DbOpt) -> None:
    """Run read-only SQL against the store (tables: runs, topics, subquestions, sources,
    topic_sources, findings, citations, reports, llm_calls, model_limits, pages, searches;
    views: usage_by_topic, usage_by_batch)."""
    from core.store import StoreError, query_readonly

    path = db_path(db)
    try:
        columns, rows = query_readonly(path, sql)
    except StoreError as exc:
        fail(str(exc))
    table = Table(*columns)
    for row in rows:
        table.add_row(*("" if v is None else str(v)[:200] for v in row))
    out.print(table)
    out.print(f"{len(rows)} row(s)")
