"""`researchflow`: run a topic or a CSV batch, show a report, query the store.

Errors a user can fix (missing file, bad CSV, unknown report id, bad SQL) print one line that
says what to do and exit non-zero; they never print a traceback. Prefect and the flows are
imported inside the commands so `--help` is instant and nothing runs at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from flows.cli_reports import export, query, search, show
from flows.console import DbOpt, db_path, fail, out, prefect_env, store_exists
from flows.local_api import ensure_api
from flows.mcp_server import mcp
from flows.serve import serve, ui

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Deep-research batches on Prefect, stored in DuckDB.")
ModelOpt = typer.Option(None, "--model", help="offline | openai:MODEL | anthropic:MODEL | "
                        "gemini:MODEL | openai-compatible:MODEL (default: auto from keys).")
SearchOpt = typer.Option(None, "--search", help="corpus | serpapi | searxng (default: auto "
                         "from SERPAPI_API_KEY, then RESEARCHFLOW_SEARXNG_URL).")
CorpusOpt = typer.Option(None, "--corpus", help="Folder of .html/.md/.txt/.pdf/.docx/.pptx "
                         "files to search instead of the bundled CPython documentation.")
LanguageOpt = typer.Option(None, "--language", help="Language of the prompts and the report: "
                           "a code or name (zh, Chinese, 中文); default: the topic's own.")
WavesHelp = ("Research waves: the plan's sub-questions, then the supervisor's follow-ups for "
             "what they left open.")
PagesHelp = "Pages read per sub-question (the researcher chooses which)."
RefreshHelp = ("Make every provider and search call again instead of reusing cached ones "
               "(a retry of the same run still reuses its own).")
WordsHelp = "Target length of the report in words (a long report is written section by section)."
CostOpt = typer.Option(None, "--max-cost-usd", min=0.0, help="Stop a topic before a provider "
                       "call would take its spend past this many USD (RESEARCHFLOW_MAX_COST_USD).")


def _check_corpus(corpus: Optional[Path]) -> None:
    if corpus is not None and not corpus.is_dir():
        fail(f"{corpus}: no such folder; --corpus takes a folder of documents")


def _check_language(language: Optional[str]) -> None:
    from core.language import resolve_language

    try:
        resolve_language(language, "")
    except ValueError as exc:
        fail(f"--language: {exc}")


@app.command()
def run(topic: str = typer.Argument(..., help="What to research."),
        max_subquestions: int = typer.Option(4, min=1, max=6),
        max_rounds: int = typer.Option(3, min=1, max=6, help="Search rounds per sub-question."),
        max_pages: int = typer.Option(6, min=1, max=30, help=PagesHelp),
        max_waves: int = typer.Option(2, min=1, max=6, help=WavesHelp),
        language: Optional[str] = LanguageOpt,
        report_words: int = typer.Option(1200, min=200, max=20000, help=WordsHelp),
        model: Optional[str] = ModelOpt, search: Optional[str] = SearchOpt,
        corpus: Optional[Path] = CorpusOpt, db: Optional[Path] = DbOpt,
        max_cost_usd: Optional[float] = CostOpt,
        refresh: bool = typer.Option(False, "--refresh", help=RefreshHelp)) -> None:
    """Research one topic and store its report."""
    _check_corpus(corpus)
    _check_language(language)
    prefect_env()
    ensure_api()
    from flows.live import LiveProgress
    from flows.research import topic_flow

    with LiveProgress(out) as live:
        live.add_topics(1)
        state = topic_flow()(topic=topic, max_subquestions=max_subquestions,
                               max_rounds=max_rounds, max_pages=max_pages, max_waves=max_waves,
                               language=language, report_words=report_words,
                               model=model, search=search,
                               corpus_dir=str(corpus) if corpus else None,
                               db_path=str(db) if db else None, max_cost_usd=max_cost_usd,
                               refresh=refresh, return_state=True)
    usage = _run_usage(db_path(db), state)
    if not state.is_completed():
        out.print(usage)
        fail(f"the topic failed: {_state_error(state)}", code=1)
    report_id = state.result()
    out.print(usage)
    out.print(f"report [bold]{report_id}[/] stored in {db_path(db)}")
    out.print(f"read it: researchflow show {report_id}" + (f" --db {db}" if db else ""))


@app.command()
def batch(csv_path: Path = typer.Argument(..., help="CSV with a 'topic' column."),
          batch_id: Optional[str] = typer.Option(None, help="Default: the CSV file name."),
          concurrency: Optional[int] = typer.Option(None, min=1, max=16,
                                                    help="Topics researched at once."),
          model: Optional[str] = ModelOpt, search: Optional[str] = SearchOpt,
          corpus: Optional[Path] = CorpusOpt, db: Optional[Path] = DbOpt,
          max_cost_usd: Optional[float] = CostOpt,
          max_batch_cost_usd: Optional[float] = typer.Option(
              None, "--max-batch-cost-usd", min=0.0, help="Cap for the whole batch: topics not "
              "started when it is reached are skipped (RESEARCHFLOW_MAX_BATCH_COST_USD)."),
          max_rounds: Optional[int] = typer.Option(None, min=1, max=6, help="Default 3."),
          max_pages: Optional[int] = typer.Option(None, min=1, max=30, help=PagesHelp),
          max_waves: Optional[int] = typer.Option(None, min=1, max=6, help=WavesHelp),
          language: Optional[str] = LanguageOpt,
          report_words: Optional[int] = typer.Option(None, min=200, max=20000, help=WordsHelp),
          refresh: bool = typer.Option(False, "--refresh", help=RefreshHelp + " Without it, "
                                       "topics whose report is already stored are not run."),
          ) -> None:
    """Research every topic of a CSV; bad rows are reported and the rest still run.

    The CSV may set max_subquestions, max_rounds, max_pages, max_waves, language and
    report_words per row; the options here are the defaults for rows that do not."""
    from core.batch import BatchFileError, read_topics_csv

    _check_corpus(corpus)
    _check_language(language)
    try:  # validate up front so a bad file costs no Prefect start-up
        rows, _ = read_topics_csv(csv_path, batch_id=batch_id or csv_path.stem)
    except BatchFileError as exc:
        fail(str(exc))
    prefect_env()
    ensure_api()
    from flows.batch import research_batch
    from flows.live import LiveProgress

    with LiveProgress(out) as live:
        live.add_topics(len(rows))
        state = research_batch(csv_path=str(csv_path), batch_id=batch_id, model=model,
                               search=search, corpus_dir=str(corpus) if corpus else None,
                               db_path=str(db) if db else None, max_concurrency=concurrency,
                               max_cost_usd=max_cost_usd, max_batch_cost_usd=max_batch_cost_usd,
                               max_rounds=max_rounds, max_pages=max_pages, max_waves=max_waves,
                               language=language, report_words=report_words,
                               refresh=refresh, return_state=True)
    _print_batch(batch_id or csv_path.stem, db_path(db))
    out.print(_run_usage(db_path(db), state))
    if not state.is_completed():
        fail(_state_error(state), code=1)


def _print_batch(batch_id: str, db: Path) -> None:
    from core.store import StoreError

    try:
        _, rows = _batch_rows(batch_id, db)
    except StoreError as exc:
        out.print(f"the batch's table is in the Prefect UI; the store cannot be read: {exc}",
                  soft_wrap=True)
        return
    _table(batch_id, db, rows)


def _batch_rows(batch_id: str, db: Path):
    from core.store import query_readonly

    return query_readonly(db, (
        "SELECT t.status, t.report_id, t.topic, u.calls, u.cost_usd, t.error FROM topics t "
        "LEFT JOIN usage_by_topic u USING (batch_id, topic_id) "
        f"WHERE t.batch_id = '{batch_id.replace(chr(39), '')}' ORDER BY t.topic"))


def _table(batch_id: str, db: Path, rows) -> None:
    table = Table("status", "report", "topic", "calls", "cost", "error", title=f"batch {batch_id}")
    for status, report_id, topic, calls, cost, error in rows:
        style = {"succeeded": "green", "skipped": "yellow"}.get(status, "red")
        table.add_row(f"[{style}]{status}[/]", report_id or "", topic, str(calls or 0),
                      f"${cost or 0:.4f}", (error or "")[:160])
    out.print(table)
    out.print(f"reports are in {db}; try:\n  researchflow query \"SELECT report_id, title FROM "
              f"reports WHERE batch_id = '{batch_id}'\"" + (f" --db {db}" if db else "") +
              "\n  researchflow show REPORT_ID", soft_wrap=True)  # commands to copy: never wrap


def _state_error(state) -> str:
    from core.failures import TopicFailed

    try:
        state.result()
    except TopicFailed as exc:  # already names the step, the signal and what to do
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - shown to the user as one line
        return f"{type(exc).__name__}: {exc}"
    return state.message or "failed"


def _run_usage(db: Path, state) -> str:
    """The usage line of the run behind `state` (every topic of a batch, or one topic)."""
    from core.store import ResultStore, StoreError

    run_id = state.state_details.flow_run_id
    if run_id is None or not store_exists(db):
        return "usage: unknown (no run id or no store)"
    try:
        return ResultStore(db).usage(run_id=str(run_id)).line()
    except StoreError as exc:
        return f"usage: unavailable ({exc})"


app.command()(show)
app.command()(search)
app.command()(export)
app.command()(serve)
app.command()(ui)
app.command()(query)
app.command()(mcp)


if __name__ == "__main__":
    app()
