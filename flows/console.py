"""What every `researchflow` command shares: the consoles, the --db option, one-line errors."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console

out = Console()
err = Console(stderr=True, soft_wrap=True)  # one line per error, whatever the width

DbOpt = typer.Option(None, "--db", help="DuckDB file (default: researchflow.duckdb, or "
                     "RESEARCHFLOW_DB_PATH).")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one line saying what went wrong and what to do, and exit non-zero."""
    err.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def db_path(db: Optional[Path]) -> Path:
    """The store: --db, else RESEARCHFLOW_STORE (a DuckLake), else RESEARCHFLOW_DB_PATH, else
    ./researchflow.duckdb."""
    from core.settings import Settings

    return Path(Settings.load(db_path=db).store_target())


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
