"""Commands that read the store: show, search, export, compare and verify reports, run
read-only SQL.

None of them writes to the store: each opens it read-only, on a connection that can read
nothing else (core.store.query), so they work on a read-only file and leave a DuckDB file that
is not a store untouched (one line says so). `search` keeps its index in a file of its own
under the cache directory. Stored text is printed as text: no rich markup read, no control
characters or terminal escape sequences.
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import typer
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown, TableElement
from rich.table import Table

from core.text.escaping import printable
from flows.console import DbOpt, db_path, err, fail, out, plain, store_exists

if TYPE_CHECKING:
    from core.store.fulltext import Hit

_LIST_REPORTS = "list them with: researchflow query \"SELECT report_id, topic FROM reports\""
TABLE_LIMIT = 1000  # rows `query` shows in a table unless --limit says otherwise
_T = TypeVar("_T")
_C1 = re.compile(r"[\x7f-\x9f]")  # what json.dumps leaves raw that a terminal would act on


class SearchKind(str, Enum):
    all = "all"
    reports = "reports"
    sources = "sources"


class ExportFormat(str, Enum):
    md = "md"
    html = "html"
    docx = "docx"
    pdf = "pdf"


class QueryFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


class _FoldedTable(TableElement):
    """A markdown table whose cells wrap and fold: rich's default cuts a cell that has a word
    (or a CJK run, which has no spaces) wider than its column with "…", and a quote in a
    comparison table would lose words."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for table in super().__rich_console__(console, options):
            if isinstance(table, Table):
                for column in table.columns:
                    column.overflow = "fold"
            yield table


class _Markdown(Markdown):
    """Markdown as `show` and `diff` print it: tables lose no text at any width."""

    elements = {**Markdown.elements, "table_open": _FoldedTable}


def _existing_store(db: Optional[str]) -> Path:
    path = db_path(db)
    if not store_exists(path):
        fail(f"no store at {path}; run `researchflow run TOPIC` or pass --db")
    return path


def _stored(read: Callable[[Path, str], Optional[_T]], path: Path, report_id: str) -> _T:
    """What `read` (a core.store.query reader) finds for a stored report, or a one-line
    failure: an unreadable store, or no such report."""
    from core.store import StoreError

    try:
        found = read(path, report_id)
    except StoreError as exc:
        fail(str(exc))
    if found is None:
        fail(f"no report {report_id!r} in {path}; {_LIST_REPORTS}")
    return found


def show(report_id: str, db: Optional[str] = DbOpt,
         raw: bool = typer.Option(False, help="Print the markdown source.")) -> None:
    """Print a stored report."""
    from core.store import StoreError
    from core.store.query import read_report, report_usage

    path = _existing_store(db)
    try:
        report = read_report(path, report_id)
        usage = report_usage(path, report_id) if report is not None else None
    except StoreError as exc:
        fail(str(exc))
    if report is None or usage is None:
        fail(f"no report {report_id!r} in {path}; {_LIST_REPORTS}")
    markdown = printable(report.markdown)
    if raw:
        sys.stdout.write(markdown)
    else:  # links as text and URL: a terminal hyperlink would hide where it goes
        out.print(_Markdown(markdown, hyperlinks=False))
    (err if raw else out).print(plain(usage.line().replace("usage:", "cost of this report:", 1)))


class SearchFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    ids = "ids"


_HIT_FIELDS = ("kind", "report_id", "url", "title", "snippet", "score")


def search(text: str = typer.Argument(..., help="Words to look for (any of them; rarer words "
                                      "and more of them rank higher)."),
           limit: int = typer.Option(10, "--limit", min=1, max=500, help="Hits to show."),
           kind: SearchKind = typer.Option(SearchKind.all, "--kind",
                                           help="Search reports, sources, or both."),
           fmt: SearchFormat = typer.Option(SearchFormat.table, "--format", "-f",
                                            help="table; json (an array of objects: kind, "
                                            "report_id, url, title, snippet, score); csv (the "
                                            "same columns); ids (one report id or source URL "
                                            "a line)."),
           as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
           db: Optional[str] = DbOpt) -> None:
    """Full-text search (BM25, offline) over stored reports and the sources they read.

    Exits 1 when nothing matches (json and csv still print an empty array or a header). The
    store is only read; the index lives under the cache directory and catches up with new
    reports on each search."""
    from core.settings import Settings
    from core.store import StoreError
    from core.store.fulltext import index_for, search_store

    if as_json:
        if fmt not in (SearchFormat.table, SearchFormat.json):
            fail(f"--json and --format {fmt.value} disagree; pass one of them")
        fmt = SearchFormat.json
    path = _existing_store(db)

    def indexing(n: int) -> None:
        err.print(f"[dim]indexing {n} new or changed report(s) and source(s)…[/]")

    try:
        hits = search_store(path, text, index=index_for(path, Settings.load().cache_dir),
                            kind=kind.value, limit=limit, on_indexing=indexing)
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    if fmt is SearchFormat.table:
        if hits:
            out.print(_hit_table(hits, text))
    else:
        _write_hits(hits, fmt)
    if not hits:
        fail(f"nothing in {path} matches {text!r}", code=1)


def _hit_table(hits: list[Hit], text: str) -> Table:
    """The hits as a table whose report ids are never broken over lines, at any width where
    the table fits: an id copied from two lines is not an id."""
    # A fixed width, at least the widest id's: rich shrinks flexible columns below their
    # min_width when space is short. URLs (never a `show` argument) fold inside it, taking a
    # fifth of the width at most.
    ids = [len(hit.key) for hit in hits if hit.kind == "report"]
    urls = [min(len(hit.key), max(out.width // 5, 14)) for hit in hits if hit.kind != "report"]
    table = Table(expand=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("report / url", width=max(ids + urls), overflow="fold")
    table.add_column("title", ratio=1, overflow="fold")  # a long word is folded, not cut
    table.add_column("snippet", ratio=2, overflow="fold")
    table.add_column("score", justify="right", no_wrap=True)
    words = [w for w in text.split() if w]
    for hit in hits:
        key = plain(hit.key)  # text, not markup: stored text may contain "[/]"
        key.no_wrap = hit.kind == "report"
        snippet = plain(hit.snippet)
        snippet.highlight_words(words, "bold yellow", case_sensitive=False)
        table.add_row(hit.kind, key, plain(hit.title[:80]), snippet, f"{hit.score:.2f}")
    return table


def _write_hits(hits: list[Hit], fmt: SearchFormat) -> None:
    """The hits to stdout for a program: json, csv or ids, whole and unstyled."""
    rows = [{"kind": hit.kind,
             "report_id": hit.key if hit.kind == "report" else None,
             "url": hit.key if hit.kind != "report" else None,
             "title": hit.title, "snippet": hit.snippet, "score": round(hit.score, 4)}
            for hit in hits]
    if fmt is SearchFormat.json:
        text = json.dumps(rows, ensure_ascii=False, indent=2)
        # json escapes C0 controls; C1 ones would reach a terminal as they are.
        sys.stdout.write(_C1.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text) + "\n")
    elif fmt is SearchFormat.csv:
        terminal = sys.stdout.isatty()
        writer = csv.writer(sys.stdout)
        writer.writerow(_HIT_FIELDS)
        for row in rows:
            cells = ["" if row[f] is None else str(row[f]) for f in _HIT_FIELDS]
            writer.writerow([printable(c) for c in cells] if terminal else cells)
    else:
        for hit in hits:
            sys.stdout.write(printable(hit.key).replace("\n", " ") + "\n")
    sys.stdout.flush()


def _export_format(fmt: "ExportFormat | None", output: Optional[Path]) -> "ExportFormat":
    """The format asked for, else the one the output's name says (`-o report.pdf` is a PDF,
    not markdown in a file named .pdf); a format the name contradicts is refused."""
    by_name = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html",
               ".docx": "docx", ".pdf": "pdf"}.get(output.suffix.lower()) if output else None
    if fmt is None:
        return ExportFormat(by_name or "md")
    if by_name and by_name != fmt.value:
        fail(f"--format {fmt.value} does not match the output's name {output.name}: "
             f"name it .{fmt.value}, or drop --format")
    return fmt


def export(report_id: str,
           fmt: Optional[ExportFormat] = typer.Option(None, "--format", "-f",
                                                      help="md: the stored markdown; html: one "
                                                      "self-contained page; docx: a Word "
                                                      "document; pdf: a PDF (font: "
                                                      "RESEARCHFLOW_PDF_FONT). Default: the "
                                                      "--output file's extension, else md."),
           output: Optional[Path] = typer.Option(None, "--output", "-o",
                                                 help="File to write (default: stdout); an "
                                                 "existing file only with --force."),
           force: bool = typer.Option(False, "--force", help="Replace an existing --output "
                                      "file (never a DuckDB database, nor the store)."),
           db: Optional[str] = DbOpt) -> None:
    """Write a stored report as markdown, a self-contained HTML page, Word or PDF."""
    from core.reports.export import BINARY, ExportError, render
    from core.settings import Settings
    from core.store.query import read_report

    fmt = _export_format(fmt, output)
    path = _existing_store(db)
    if output is not None:
        _check_output(output, path, force)
    report = _stored(read_report, path, report_id)
    if fmt.value in BINARY and output is None and sys.stdout.isatty():
        fail(f"a {fmt.value} file is binary: write it with -o FILE (or redirect stdout)")
    settings = Settings.load()
    # The folders a local source may be under, to name it by its path there (not file:///...).
    corpus = [folder.expanduser().resolve() for folder in
              (settings.corpus_dir, settings.cache_dir / "corpus" / "pydocs") if folder]
    try:
        page = render(report, fmt.value, pdf_font=settings.pdf_font, corpus_dirs=corpus)
    except ExportError as exc:
        fail(str(exc))
    if output is None:
        if isinstance(page, bytes):
            sys.stdout.buffer.write(page)
        else:
            sys.stdout.write(printable(page))
        return
    data = page if isinstance(page, bytes) else page.encode("utf-8")
    try:  # O_EXCL: an existing file is never replaced without --force
        flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(output, flags | (os.O_TRUNC if force else os.O_EXCL), 0o666)
    except FileExistsError:
        fail(f"{output} already exists; pass --force to replace it, or choose another -o")
    except OSError as exc:  # a named pipe nobody reads: ENXIO, at once (O_NONBLOCK)
        fail(f"cannot write {output}: {exc.strerror or exc}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped in after the check
            fail(f"{output} is not a regular file; -o writes a regular file or a new path")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "wb") as fh:
            fh.write(data)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    err.print(plain(f"wrote {output}"))


def _is_duckdb_file(path: Path) -> bool:
    """A DuckDB database file: its header holds the magic bytes DUCK at offset 8."""
    try:
        with path.open("rb") as fh:
            return fh.read(12)[8:12] == b"DUCK"
    except OSError:
        return False


def _check_output(output: Path, store: Path, force: bool) -> None:
    """Refuse an -o that would overwrite the store (or its write-ahead log), any DuckDB
    database, or, without --force, any existing file."""
    from core.store.backend import lake_target

    target = output.expanduser().resolve()
    if lake_target(store) is None:
        own = store.expanduser().resolve()
        if target in (own, own.with_name(own.name + ".wal")):
            fail(f"{output} is the store itself; export to another file")
    if target.is_dir():
        fail(f"{output} is a folder; -o takes a file name")
    if not target.exists():
        return
    if not target.is_file():  # stat only: opening a named pipe would wait for a reader
        fail(f"{output} is not a regular file (a named pipe or a device); -o writes a regular "
             "file or a new path")
    if _is_duckdb_file(target):
        fail(f"{output} is a DuckDB database; export never writes over one, even with --force")
    if not force:
        fail(f"{output} already exists; pass --force to replace it, or choose another -o")


def query(sql: str,
          params: Optional[list[str]] = typer.Option(
              None, "--param", "-p", help="A value for the next ? placeholder of the SQL "
              "(repeat for each; values are text, cast in SQL as needed)."),
          limit: Optional[int] = typer.Option(
              None, "--limit", min=0, help=f"At most this many rows (default: {TABLE_LIMIT} "
              "in a table, every row as csv or json; 0: no limit)."),
          fmt: QueryFormat = typer.Option(QueryFormat.table, "--format", "-f",
                                          help="table, or every row as csv or json (an array "
                                          "of objects) to stdout."),
          timeout: float = typer.Option(30.0, "--timeout", min=0.0,
                                        help="Seconds before the query is stopped (0: never)."),
          db: Optional[str] = DbOpt) -> None:
    """Run one read-only query (SELECT, WITH, FROM, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)
    against the store; anything else is refused (exit 2) and the store is never changed.

    Tables: runs, topics, subquestions, sources (one row per version of a page),
    topic_sources, findings, citations, reports, changes, ledger (kind llm, search, served,
    fallback), model_limits, pages, searches. Views: latest_reports, report_sources,
    citation_quotes, source_versions, report_editions, report_changes, failures, cost_by_batch,
    usage_by_topic, usage_by_batch, fallbacks, llm_calls (the ledger's LLM calls). Every table,
    view and column has a comment: SELECT * FROM duckdb_columns()."""
    from core.store import StoreError
    from core.store.query import open_query

    path = db_path(db)
    if limit is None:
        limit = TABLE_LIMIT if fmt is QueryFormat.table else 0
    try:
        with open_query(path, sql, params or None, timeout=timeout or None) as cursor:
            if fmt is QueryFormat.table:
                _print_table(cursor, limit)
            else:
                _stream(cursor, fmt, limit)
    except StoreError as exc:
        fail(str(exc))


CELL_CHARS = 1000  # a query table's cell: longer values end in "…" (csv and json: whole)


def _print_table(cursor: Any, limit: int) -> None:
    rows = cursor.fetch(limit + 1) if limit else list(cursor)
    more = bool(limit) and len(rows) > limit
    rows = rows[:limit] if limit else rows
    table = Table()
    for column in cursor.columns:  # cells wrap, and a long word or CJK run folds: never "…"
        table.add_column(plain(column), overflow="fold")
    shortened = 0
    for row in rows:  # text, not markup: stored text may contain "[/]"
        cells = ["" if v is None else str(v) for v in row]
        shortened += sum(len(c) > CELL_CHARS for c in cells)
        table.add_row(*(plain(c if len(c) <= CELL_CHARS else c[:CELL_CHARS - 1] + "…")
                        for c in cells))
    out.print(table)
    if shortened:  # a page's whole text would fill screens: said, and where to get it whole
        out.print(f"{shortened} value(s) longer than {CELL_CHARS} characters shortened (…); "
                  "--format csv|json prints them whole")
    if more:
        out.print(plain(f"{len(rows)} row(s) shown; the query has more (--limit N for more, "
                        "--limit 0 for every row, or --format csv|json to stdout)"))
    else:
        out.print(f"{len(rows)} row(s)")


def _stream(cursor: Any, fmt: QueryFormat, limit: int) -> None:
    """Every row (at most `limit`; 0: all) to stdout as it is fetched."""
    terminal = sys.stdout.isatty()
    written = 0
    if fmt is QueryFormat.csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(cursor.columns)
    else:
        sys.stdout.write("[")
    for row in cursor:
        if limit and written == limit:
            err.print(plain(f"stopped at {limit} row(s) (--limit); --limit 0 for every row"))
            break
        if fmt is QueryFormat.csv:
            cells = ["" if v is None else str(v) for v in row]
            writer.writerow([printable(c) for c in cells] if terminal else cells)
        else:
            item = json.dumps(dict(zip(cursor.columns, row)), default=str, ensure_ascii=False)
            # json escapes C0 controls; C1 ones would reach a terminal as they are.
            item = _C1.sub(lambda m: f"\\u{ord(m.group(0)):04x}", item)
            sys.stdout.write(("," if written else "") + "\n" + item)
        written += 1
    if fmt is QueryFormat.json:
        sys.stdout.write("\n]\n" if written else "]\n")
    sys.stdout.flush()


class DiffFormat(str, Enum):
    md = "md"
    json = "json"


def diff(report_a: str = typer.Argument(..., help="The earlier report's id; alone, the report "
                                         "to compare with the edition before it."),
         report_b: Optional[str] = typer.Argument(None, help="The later report's id."),
         format: DiffFormat = typer.Option(DiffFormat.md, "--format",
                                           help="md (the report's section) or json."),
         db: Optional[str] = DbOpt) -> None:
    """What changed from one report of a topic to another: sources new and gone, claims
    added, dropped or changed (matched by their evidence), numbers that changed.

    With one report: what changed since the edition before it, as the store holds it now (a
    report's own section was made when it was written; `report_editions.stale` says when that
    no longer holds)."""
    from core.reports.editions import compare, section
    from core.store.query import read_report, read_snapshot

    path = _existing_store(db)
    if report_b is None:
        report_b, report_a = report_a, _predecessor(path, report_a)
    before = _stored(read_snapshot, path, report_a)
    after = _stored(read_snapshot, path, report_b)
    changes = compare(before, after)
    if format is DiffFormat.json:
        sys.stdout.write(json.dumps(changes.as_json(), ensure_ascii=False, indent=2) + "\n")
        return
    text = printable(section(changes, _stored(read_report, path, report_b).language))
    if sys.stdout.isatty():
        out.print(_Markdown(text, hyperlinks=False))
    else:
        sys.stdout.write(text)


def _predecessor(path: Path, report_id: str) -> str:
    """The report of the edition before `report_id`'s, or a one-line failure."""
    from core.store.query import read_predecessor

    predecessor, stale = _stored(read_predecessor, path, report_id)
    if predecessor is None:
        fail(f"report {report_id!r} is its topic's first edition: there is none before it to "
             "compare with", code=1)
    if stale:
        err.print(plain(f"report {report_id}'s own \"What changed\" was made against another "
                        f"state of its predecessor; compared again with {predecessor}"))
    return predecessor


def verify(report_id: str, db: Optional[str] = DbOpt) -> None:
    """Check every quote of a stored report against the version of the page it cites (the
    text as it was read, whatever the page says now).

    Exits 0 when every quote is found there (runs of whitespace may differ), else prints one
    line per quote not found (reference number, URL, version, why, the quote) and exits 1."""
    from core.store.query import read_unverified

    checked, missing = _stored(read_unverified, _existing_store(db), report_id)
    for row in missing:
        quote = " ".join((row["quote"] or "").split())
        quote = quote if len(quote) <= 160 else quote[:159] + "…"
        line = (f"[{row['number']}] {row['url']} @{row['content_hash'] or '-'}: "
                f"{row['reason']}: “{quote}”")
        sys.stdout.write(printable(line) + "\n")
    if missing:
        fail(f"{len(missing)} of {checked} quote(s) of {report_id} not found in the version of "
             "the page they cite", code=1)
    out.print(plain(f"all {checked} quote(s) of {report_id} found in the version of the page "
                    "they cite"))
