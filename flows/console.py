"""What every `researchflow` command shares: the consoles, the --db option, one-line errors,
text printed as text, and keeping Prefect's tracebacks off the terminal.

Anything a user typed or a page held is printed through `plain` (or `fail`): never read as
rich markup (`[/]` is two characters, not a closing tag), and without control characters or
terminal escape sequences (core.text.escaping.printable).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.text import Text

from core.text.escaping import printable

out = Console()
err = Console(stderr=True, soft_wrap=True)  # one line per error, whatever the width

DbOpt = typer.Option(None, "--db", help="The store: a DuckDB file, or a DuckLake written "
                     "'ducklake:postgres:dbname=NAME host=HOST user=USER' (quote it). Default: "
                     "RESEARCHFLOW_STORE (a DuckLake), else RESEARCHFLOW_DB_PATH, else "
                     "researchflow.duckdb.")
DEBUG_ENV = "RESEARCHFLOW_DEBUG"


_debug = False


def set_debug(on: bool) -> None:
    """--debug of this command line (each invocation sets it)."""
    global _debug
    _debug = on


def debugging() -> bool:
    """Whether --debug (or RESEARCHFLOW_DEBUG=1) asked for tracebacks."""
    return _debug or os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def plain(text: object, style: str = "") -> Text:
    """`text` for rich, as written: no markup read, control characters removed."""
    return Text(printable(str(text)), style=style)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one line saying what went wrong and what to do, and exit non-zero."""
    line = " ".join(printable(str(message)).split())
    err.print(Text.assemble(("error:", "bold red"), " ", line))
    raise typer.Exit(code)


def db_path(db: Optional[str | Path]) -> Path:
    """The store: --db, else RESEARCHFLOW_STORE (a DuckLake), else RESEARCHFLOW_DB_PATH, else
    ./researchflow.duckdb.

    A --db names a lake only when it starts with "ducklake:" as typed; any other is a file,
    made absolute here, before `Path` drops a leading "./" and turns "./ducklake:x" into one.
    """
    from core.settings import Settings
    from core.store.lake import PREFIX

    if db is not None and not str(db).startswith(PREFIX):
        db = Path(db).expanduser().resolve()
    return Path(Settings.load(db_path=Path(db) if db is not None else None).store_target())


def check_store(target: Path) -> None:
    """A store that can never be one (a folder, someone else's DuckDB file) or a lake target
    carrying a password fails here, in one line, before any flow's parameters could carry it."""
    from core.store import StoreError
    from core.store.query import check_target

    try:
        check_target(target)
    except StoreError as exc:
        fail(str(exc))


def flow_db(db: Optional[str | Path]) -> str | None:
    """The --db to hand a flow: the store `db_path` chose, or None when --db was not given."""
    return None if db is None else str(db_path(db))


def store_exists(path: Path) -> bool:
    """A lake is there to ask; a file must exist (reading never creates one)."""
    from core.store.backend import lake_target

    return lake_target(path) is not None or path.exists()


def prefect_env() -> None:
    # Offline-friendly defaults; anything the user set wins.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The progress bar is the terminal view; INFO logs still reach the Prefect API and UI.
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    mask_terminal()


def mask_terminal() -> None:
    """Whatever a run prints (our lines, Prefect's console logs, a traceback) shows no key this
    process loaded: stdout and stderr mask by value (core.secrets)."""
    from core.secrets import mask_stream

    sys.stdout, sys.stderr = mask_stream(sys.stdout), mask_stream(sys.stderr)


class _NoRunTracebacks(logging.Filter):
    """On the terminal: nothing from flow and task run loggers (the progress bar and the
    closing line say what happened; the run's logs, tracebacks included, stay in the Prefect
    UI), and no traceback from anything else."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(("prefect.flow_runs", "prefect.task_runs")):
            return False
        if record.exc_info or record.exc_text:
            record.exc_info, record.exc_text = None, None
        return True


def quiet_prefect_console() -> None:
    """Keep Prefect's console handler to one line per problem, unless --debug. Call it once
    Prefect is imported (it configures logging on import)."""
    if debugging():
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in
                                       logging.root.manager.loggerDict)]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if isinstance(handler, PrefectConsoleHandler) and not any(
                    isinstance(f, _NoRunTracebacks) for f in handler.filters):
                handler.addFilter(_NoRunTracebacks())
