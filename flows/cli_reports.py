"""Commands that read the store: show, search and export reports, run read-only SQL.

None of them writes to the store: `show` opens it like a writer but changes nothing, the others
open it read-only. `search` keeps its index in a file of its own under the cache directory.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from flows.console import DbOpt, db_path, err, fail, out, store_exists

_LIST_REPORTS = "list them with: researchflow query \"SELECT report_id, topic FROM reports\""


class SearchKind(str, Enum):
    all = "all"
    reports = "reports"
    sources = "sources"


class ExportFormat(str, Enum):
    md = "md"
    html = "html"
    docx = "docx"
    pdf = "pdf"


def _existing_store(db: Optional[Path]) -> Path:
    path = db_path(db)
    if not store_exists(path):
        fail(f"no store at {path}; run `researchflow run TOPIC` or pass --db")
    return path


def show(report_id: str, db: Optional[Path] = DbOpt,
         raw: bool = typer.Option(False, help="Print the markdown source.")) -> None:
    """Print a stored report."""
    from core.store import ResultStore, StoreError

    path = _existing_store(db)
    try:
        report = ResultStore(path).get_report(report_id)
    except StoreError as exc:
        fail(str(exc))
    if report is None:
        fail(f"no report {report_id!r} in {path}; {_LIST_REPORTS}")
    if raw:
        sys.stdout.write(report["markdown"])
    else:
        out.print(Markdown(report["markdown"]))
    (err if raw else out).print(report["usage"].line().replace("usage:", "cost of this report:", 1))


def search(text: str = typer.Argument(..., help="Words to look for (any of them; rarer words "
                                      "and more of them rank higher)."),
           limit: int = typer.Option(10, "--limit", min=1, max=500, help="Hits to show."),
           kind: SearchKind = typer.Option(SearchKind.all, "--kind",
                                           help="Search reports, sources, or both."),
           db: Optional[Path] = DbOpt) -> None:
    """Full-text search (BM25, offline) over stored reports and the sources they read.

    Exits 1 when nothing matches. The store is only read; the index lives under the cache
    directory and catches up with new reports on each search."""
    from core.settings import Settings
    from core.store import StoreError
    from core.store.fulltext import index_for, search_store

    path = _existing_store(db)

    def indexing(n: int) -> None:
        err.print(f"[dim]indexing {n} new or changed report(s) and source(s)…[/]")

    try:
        hits = search_store(path, text, index=index_for(path, Settings.load().cache_dir),
                            kind=kind.value, limit=limit, on_indexing=indexing)
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    if not hits:
        fail(f"nothing in {path} matches {text!r}", code=1)
    table = Table(expand=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("report / url", overflow="fold", min_width=14, ratio=1)  # ids stay whole
    table.add_column("title", ratio=1)
    table.add_column("snippet", ratio=2)
    table.add_column("score", justify="right", no_wrap=True)
    words = [w for w in text.split() if w]
    for hit in hits:
        snippet = Text(hit.snippet)  # Text, not markup: stored text may contain "[/]"
        snippet.highlight_words(words, "bold yellow", case_sensitive=False)
        table.add_row(hit.kind, Text(hit.key), Text(hit.title[:80]), snippet, f"{hit.score:.2f}")
    out.print(table)


def export(report_id: str,
           fmt: ExportFormat = typer.Option(ExportFormat.md, "--format", "-f",
                                            help="md: the stored markdown; html: one "
                                            "self-contained page; docx: a Word document; pdf: "
                                            "a PDF (font: RESEARCHFLOW_PDF_FONT)."),
           output: Optional[Path] = typer.Option(None, "--output", "-o",
                                                 help="File to write (default: stdout)."),
           db: Optional[Path] = DbOpt) -> None:
    """Write a stored report as markdown, a self-contained HTML page, Word or PDF."""
    from core.export import BINARY, ExportError, render
    from core.settings import Settings
    from core.store import StoreError
    from core.store.query import read_report

    path = _existing_store(db)
    try:
        report = read_report(path, report_id)
    except StoreError as exc:
        fail(str(exc))
    if report is None:
        fail(f"no report {report_id!r} in {path}; {_LIST_REPORTS}")
    if fmt.value in BINARY and output is None and sys.stdout.isatty():
        fail(f"a {fmt.value} file is binary: write it with -o FILE (or redirect stdout)")
    try:
        page = render(report, fmt.value, pdf_font=Settings.load().pdf_font)
    except ExportError as exc:
        fail(str(exc))
    if output is None:
        if isinstance(page, bytes):
            sys.stdout.buffer.write(page)
        else:
            sys.stdout.write(page)
        return
    try:
        if isinstance(page, bytes):
            output.write_bytes(page)
        else:
            output.write_text(page, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    err.print(f"wrote {output}")


def query(sql: str, db: Optional[Path] = DbOpt) -> None:
    """Run read-only SQL against the store; a statement that would change it is refused.

    Tables: runs, topics, subquestions, sources, topic_sources, findings, citations, reports,
    llm_calls, model_limits, pages, searches. Views: latest_reports, report_sources,
    citation_quotes, failures, cost_by_batch, usage_by_topic, usage_by_batch."""
    from core.store import StoreError, query_readonly

    path = db_path(db)
    try:
        columns, rows = query_readonly(path, sql)
    except StoreError as exc:
        fail(str(exc))
    table = Table(*(escape(c) for c in columns))
    for row in rows:  # Text, not markup: stored text may contain "[/]"
        table.add_row(*(Text("" if v is None else str(v)[:200]) for v in row))
    out.print(table)
    out.print(f"{len(rows)} row(s)")
