"""`researchflow`: run a topic or a CSV batch, show a report, query the store.

Errors a user can fix (missing file, bad CSV, unknown report id, bad SQL) print one line that
says what to do and exit non-zero; they never print a traceback, and neither does anything
else unless `--debug` asks for it (Prefect's own tracebacks stay in the run's logs in the UI).
Prefect and the flows are imported inside the commands so `--help` is instant and nothing runs
at import.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from core.models import TopicOptions
from core.settings import settings_error
from flows.cli_reports import diff, export, query, search, show, verify
from flows.cli_limits import limits
from flows.cli_retry import retry
from flows.console import (DbOpt, check_store, db_path, debugging, err, fail, flow_db, out,
                           plain, prefect_env, quiet_prefect_console, set_debug, store_exists)
from flows.local_api import ensure_api
from flows.mcp_server import mcp
from flows.options import with_topic_options
from flows.serve import serve, ui


class _OneLineErrors(TyperGroup):
    """Any exception a command lets out is one line, not a traceback (--debug shows it)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Exception as exc:  # noqa: BLE001 - shown as one line; --debug re-raises
            # Exits, usage errors and bad parameters are the command line's own: click (as
            # vendored by typer) prints those itself.
            if debugging() or type(exc).__module__.startswith(("click", "typer")):
                raise
            if isinstance(exc, ValidationError) and exc.title == "Settings":
                fail(settings_error(exc), code=1)  # what to set, not pydantic's report
            err.print(Text.assemble(("error:", "bold red"), " ", plain(
                " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]),
                " (run with --debug for the traceback)"))
            raise typer.Exit(1) from None


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=_OneLineErrors,
                  pretty_exceptions_enable=False,
                  help="Deep-research batches on Prefect, stored in DuckDB.")


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks, Prefect's "
                                     "console logs included, instead of one-line errors.")
          ) -> None:
    set_debug(debug)
    _refuse_foreign_dotenv()


def _refuse_foreign_dotenv() -> None:
    """Prefect reads the working directory's .env, prefect.toml and pyproject.toml itself: a
    PREFECT_API_URL planted there would send every run, topic and parameter to the server it
    names (core.envfile.FOREIGN)."""
    from core.envfile import foreign_destinations

    found = foreign_destinations()
    if found:
        fail(f"{', '.join(found)} would send traffic where a file in this folder says; "
             "export it in the environment instead, or remove it from that file")


ModelOpt = typer.Option(None, "--model", help="offline | openai:MODEL | anthropic:MODEL | "
                        "gemini:MODEL | openai-compatible:MODEL (default: auto from keys).")
SearchOpt = typer.Option(None, "--search", help="corpus | serpapi | searxng (default: auto "
                         "from SERPAPI_API_KEY, then RESEARCHFLOW_SEARXNG_URL).")
CorpusOpt = typer.Option(None, "--corpus", help="Folder of .html/.md/.txt/.pdf/.docx/.pptx "
                         "files to search instead of the bundled CPython documentation.")
RefreshHelp = ("Make every provider and search call again instead of reusing cached ones "
               "(a retry of the same run still reuses its own).")
class Fallback(str, Enum):
    extractive = "extractive"
    none = "none"


FallbackOpt = typer.Option(None, "--fallback", help="When the model's answers for a role stay invalid (a weak "
                           "model): 'extractive' (default) lets the offline engine answer that "
                           "role and the report says so; 'none' fails the topic naming the role "
                           "(RESEARCHFLOW_FALLBACK).")
CostOpt = typer.Option(None, "--max-cost-usd", min=0.0, help="Stop a topic before a provider "
                       "call would take its spend past this many USD (RESEARCHFLOW_MAX_COST_USD).")


def _fallback(fallback: Optional[Fallback]) -> Optional[str]:
    """--fallback as the flow's parameter (None: the flow reads RESEARCHFLOW_FALLBACK)."""
    return fallback.value if fallback is not None else None


def _check_corpus(corpus: Optional[Path]) -> None:
    if corpus is not None and not corpus.is_dir():
        fail(f"{corpus}: no such folder; --corpus takes a folder of documents")


SHOWN_BAD_ROWS = 20  # a CSV's bad rows printed one by one; the rest are counted


def _check_topic(topic: str) -> None:
    """The topic's own checks (length above all), before Prefect spends seconds starting."""
    from pydantic import ValidationError

    from core.models import Topic

    try:
        Topic(text=topic)
    except ValidationError as exc:
        fail("the topic: " + "; ".join(e["msg"] for e in exc.errors()))


def _check_store(db: Optional[str]) -> None:
    """A --db that can never be a store fails here, not inside the flow."""
    check_store(db_path(db))


@app.command()
@with_topic_options(defaults=True)
def run(topic: str = typer.Argument(..., help="What to research."),
        model: Optional[str] = ModelOpt, search: Optional[str] = SearchOpt,
        corpus: Optional[Path] = CorpusOpt, db: Optional[str] = DbOpt,
        max_cost_usd: Optional[float] = CostOpt,
        refresh: bool = typer.Option(False, "--refresh", help=RefreshHelp),
        fallback: Optional[Fallback] = FallbackOpt,
        options: TopicOptions = TopicOptions()) -> None:
    """Research one topic and store its report."""
    _check_topic(topic)
    _check_corpus(corpus)
    _check_store(db)
    prefect_env()
    own_api = ensure_api()  # None: a Prefect server the user runs (its UI reviews plans)
    _pace_alone(own_api)
    from flows.live import LiveProgress
    from flows.review_terminal import plan_reviews
    from flows.topic import research_topic

    quiet_prefect_console()
    with LiveProgress(out) as live, plan_reviews(out, live, terminal=own_api is not None):
        live.add_topics(1)
        state = research_topic(topic=topic, options=options, model=model, search=search,
                               corpus_dir=str(corpus) if corpus else None,
                               db_path=flow_db(db), max_cost_usd=max_cost_usd,
                               refresh=refresh, fallback=_fallback(fallback),
                               return_state=True)
    usage = _run_usage(db_path(db), state)
    out.print(plain(usage))
    _print_run(state, kept=own_api is None)
    if state.is_cancelled():  # its plan was not approved
        fail(f"the topic was cancelled: {state.message or 'cancelled'}", code=1)
    if not state.is_completed():
        fail(f"the topic failed: {_state_error(state)}", code=1)
    report_id = state.result()
    out.print(Text.assemble("report ", (report_id, "bold"), " stored in ", plain(db_path(db))))
    out.print(plain(f"read it: researchflow show {report_id}{_db_hint(db)}"), soft_wrap=True)


def _pace_alone(own_api: Optional[str]) -> None:
    """On the Prefect API this command started for itself, with the tasks in its own threads,
    no other process calls the providers for its runs: their pacing stays in this process (no
    request to the server per call). On a server the user runs, or with Dask workers (which
    reach this command's API too), the limits are the server's (tasks/shared_pacing.py)."""
    if own_api is None:
        return
    from core.settings import Settings
    from tasks import contexts

    try:
        runner = Settings.load().task_runner
    except ValueError:  # the flow says what is wrong with the settings
        return
    if runner == "threads":
        contexts.alone()


def _print_run(state, *, kept: bool) -> None:
    """The flow run's id; on a Prefect server the user runs (`kept`), its page in the UI and,
    when it did not complete, the command that retries it. The API a command starts for itself
    ends with it, so its run cannot be retried: running the command again reuses its calls."""
    run_id = state.state_details.flow_run_id
    if run_id is None:
        return
    if not kept:
        out.print(plain(f"flow run {run_id} (on this command's own Prefect API, gone when it "
                        "ends: set PREFECT_API_URL to keep runs and retry them)"), soft_wrap=True)
        return
    from prefect.utilities.urls import url_for

    url = url_for("flow-run", obj_id=run_id)
    out.print(plain(f"flow run {run_id}" + (f": {url}" if url else "")), soft_wrap=True)
    if not state.is_completed():  # a command to copy: never wrapped
        out.print(plain(f"retry it (every finished call is reused): researchflow retry {run_id}"),
                  soft_wrap=True)


def _db_hint(db: Optional[str]) -> str:
    """' --db STORE' to paste into a command, quoted for a shell, or "" for the default."""
    import shlex

    return f" --db {shlex.quote(str(db_path(db)))}" if db else ""


@app.command()
@with_topic_options(defaults=False)
def batch(csv_path: Path = typer.Argument(..., help="CSV with a 'topic' column."),
          batch_id: Optional[str] = typer.Option(
              None, "--batch-name", "--batch-id",
              help="The batch's name (default: the CSV file's name without .csv). A topic's "
              "editions form one history per batch name, so the same topic run from another "
              "CSV under the same name continues it (--batch-id: the old spelling)."),
          concurrency: Optional[int] = typer.Option(None, min=1, max=16,
                                                    help="Topics researched at once."),
          model: Optional[str] = ModelOpt, search: Optional[str] = SearchOpt,
          corpus: Optional[Path] = CorpusOpt, db: Optional[str] = DbOpt,
          max_cost_usd: Optional[float] = CostOpt,
          max_batch_cost_usd: Optional[float] = typer.Option(
              None, "--max-batch-cost-usd", min=0.0, help="Cap for the whole batch: topics not "
              "started when it is reached are skipped (RESEARCHFLOW_MAX_BATCH_COST_USD)."),
          refresh: bool = typer.Option(False, "--refresh", help=RefreshHelp + " Without it, "
                                       "topics whose report is already stored in this edition "
                                       "are not run."),
          edition: Optional[str] = typer.Option(
              None, "--edition", help="The edition this run belongs to (default: today's "
              "date). A new edition researches every topic again, reusing what did not change, "
              "and its reports say what changed since the previous edition."),
          fallback: Optional[Fallback] = FallbackOpt,
          options: TopicOptions = TopicOptions()) -> None:
    """Research every topic of a CSV; bad rows are reported and the rest still run.

    The CSV may set any of the options below per row (columns max_subquestions, max_rounds,
    max_pages, max_waves, language, report_words, review_plan, review_timeout,
    review_on_timeout); the options here are the defaults for rows that do not."""
    import datetime

    from core.reports.editions import edition_name

    try:
        edition = edition_name(edition, lambda: datetime.date.today().isoformat())
    except ValueError as exc:
        fail(f"--edition: {exc}")
    from core.topics.rows import BatchFileError, read_topics_csv

    _check_corpus(corpus)
    _check_store(db)
    from core.settings import Settings

    try:  # validate up front so a bad file costs no Prefect start-up
        rows, bad = read_topics_csv(csv_path, batch_id=batch_id or csv_path.stem,
                                    warn=lambda line: err.print(plain(f"warning: {line}")),
                                    max_rows=Settings.load().max_csv_rows)
    except BatchFileError as exc:
        fail(str(exc))
    for row in bad[:SHOWN_BAD_ROWS]:
        err.print(plain(f"row {row.row}: {row.message} (recorded as invalid; the other rows run)"))
    if len(bad) > SHOWN_BAD_ROWS:
        err.print(plain(f"... and {len(bad) - SHOWN_BAD_ROWS:,} more invalid rows (recorded "
                        "as invalid, each with its reason; the other rows run)"))
    prefect_env()
    own_api = ensure_api()
    _pace_alone(own_api)
    from flows.batch import research_batch
    from flows.live import LiveProgress
    from flows.review_terminal import plan_reviews

    quiet_prefect_console()
    with LiveProgress(out) as live, plan_reviews(out, live, terminal=own_api is not None):
        live.add_topics(len(rows))
        state = research_batch(csv_path=str(csv_path), batch_id=batch_id, defaults=options,
                               model=model, search=search,
                               corpus_dir=str(corpus) if corpus else None,
                               db_path=flow_db(db), max_concurrency=concurrency,
                               max_cost_usd=max_cost_usd, max_batch_cost_usd=max_batch_cost_usd,
                               refresh=refresh, edition=edition,
                               fallback=_fallback(fallback), return_state=True)
    _print_batch(batch_id or csv_path.stem, db, edition)
    out.print(plain(_run_usage(db_path(db), state)))
    _print_run(state, kept=own_api is None)
    if not state.is_completed():
        fail(_state_error(state), code=1)


def _print_batch(batch_id: str, db: Optional[str], edition: str) -> None:
    from core.store import StoreError

    try:
        _, rows = _batch_rows(batch_id, db_path(db), edition)
    except StoreError as exc:
        out.print(plain(f"the batch's table is in the Prefect UI; the store cannot be read: "
                        f"{exc}"), soft_wrap=True)
        return
    _table(batch_id, db, rows)


def _batch_rows(batch_id: str, db: Path, edition: str):
    """The batch's topics in this edition (an invalid row without a topic has none)."""
    from core.store import query_readonly

    return query_readonly(db, (
        "SELECT t.status, t.report_id, t.topic, u.calls, u.cost_usd, t.error, "
        "rc.changes FROM topics t "
        "LEFT JOIN usage_by_topic u USING (batch_id, topic_id) "
        "LEFT JOIN report_changes rc ON rc.report_id = t.report_id "
        "WHERE t.batch_id = ? AND coalesce(t.edition, ?) = ? ORDER BY t.topic"),
        [batch_id, edition, edition])


def _table(batch_id: str, db: Optional[str], rows) -> None:
    import shlex

    table = Table(title=plain(f"batch {batch_id}"))
    for name in ("status", "report", "topic", "calls", "cost", "changed", "error"):
        whole = name in ("status", "report", "calls", "cost")  # ids stay whole, to copy
        table.add_column(name, no_wrap=whole, min_width=14 if name == "report" else None)
    for status, report_id, topic, calls, cost, error, changes in rows:
        style = {"succeeded": "green", "skipped": "yellow"}.get(status, "red")
        changed = "" if changes is None else ("no" if changes == 0 else str(changes))
        table.add_row(plain(status, style), plain(report_id or ""), plain(topic[:200]),
                      str(calls or 0), f"${cost or 0:.4f}", changed,
                      plain((error or "")[:160]))
    out.print(table)
    sql = "SELECT report_id, title FROM reports WHERE batch_id = ?"
    out.print(plain(f"reports are in {db_path(db)}; try:\n  researchflow query \"{sql}\" -p "
                    f"{shlex.quote(batch_id)}{_db_hint(db)}\n  researchflow show REPORT_ID"
                    f"{_db_hint(db)}"), soft_wrap=True)  # commands to copy: never wrap


def _state_error(state) -> str:
    """The failed run's one line; with --debug, its traceback first (an expected failure ends
    its run with a Failed state, so Prefect's console logs no longer show one)."""
    import traceback

    from core.topics.failures import BatchIncomplete, TopicFailed

    try:
        state.result()
    except Exception as exc:  # noqa: BLE001 - shown to the user as one line
        if debugging():
            err.print(plain("".join(traceback.format_exception(exc))), soft_wrap=True)
        if isinstance(exc, (TopicFailed, BatchIncomplete)):  # one line: the step, the signal,
            return str(exc)                # what to do (a batch's rows are in its table)
        return f"{type(exc).__name__}: {exc}"
    return state.message or "failed"


def _run_usage(db: Path, state) -> str:
    """The usage line of the run behind `state` (every topic of a batch, or one topic)."""
    from core.store import ResultStore, StoreError
    from tasks import contexts

    run_id = state.state_details.flow_run_id
    if run_id is None or not store_exists(db):
        return "usage: unknown (no run id or no store)"
    contexts.flush()  # what the run's tasks recorded in this process is in the store first
    try:
        return ResultStore(db).usage(run_id=str(run_id)).line()
    except StoreError as exc:
        return f"usage: unknown ({exc})"


app.command()(show)
app.command()(search)
app.command()(export)
app.command()(diff)
app.command()(verify)
app.command()(retry)
app.command()(limits)
app.command()(serve)
app.command()(ui)
app.command()(query)
app.command()(mcp)


if __name__ == "__main__":
    app()
