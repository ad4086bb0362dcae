"""Hostile input, through the real CLI, on real DuckDB files (and a real Prefect API where a
run is needed): what a user types, a page holds or a CSV cell carries.

`store` is a real store whose report, sources and quotes carry the attacks: rich markup,
terminal escape sequences, markdown links to javascript:, HTML. `cli` runs the command
in-process (typer's CliRunner); `researchflow` runs the installed command in a subprocess, the
way a user does, for what only a real process shows (Prefect's console, exit codes).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from core.models import Source
from core.store import ResultStore, query_readonly
from core.store.connection import release_all
from flows.cli import app
from flows.console import out
from tests.core.test_store_views import cite, topic_result

ESC = "\x1b"
# What a page may hold to take over a terminal: a window title (OSC 0), a screen clear and
# colour (CSI), a hyperlink (OSC 8), a C1 CSI, a bell, a carriage return that rewrites a line.
TERMINAL_ATTACK = (f"{ESC}]0;pwned-title\x07 clear {ESC}[2J{ESC}[31mRED{ESC}[0m "
                   f"{ESC}]8;;javascript:alert(1){ESC}\\click{ESC}]8;;{ESC}\\ "
                   f"c1 \x9b31m bell \x07 back\rspace")
MARKUP = "[bold red]x[/] and [/]"
PLANTED = "[click](javascript:alert(1)) <img src=x onerror=alert(1)>"
PAGE = Source(url="https://example.org/locks", title=f"File locks {MARKUP}",
              text=f"DuckDB takes an exclusive lock. {TERMINAL_ATTACK} The lock is released.")

runner = CliRunner()


def cli(*args: str):
    """The command in-process; never a traceback in what it printed."""
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def researchflow(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed command in a subprocess, as a user runs it."""
    exe = Path(sys.executable).with_name("researchflow")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "flows.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(out, "width", 200)  # whole ids and URLs in one line, to assert on


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A real store holding one report whose every text field is hostile."""
    path = tmp_path / "store.duckdb"
    result = topic_result(
        f"DuckDB locks {MARKUP}", title=f"Locks {MARKUP} {PLANTED}",
        body=f"One writer at a time {TERMINAL_ATTACK} <script>alert(1)</script> [1].",
        sources=(PAGE,), citations=(cite(1, PAGE, f"an exclusive lock {TERMINAL_ATTACK}"),))
    ResultStore(path).save_result(result, run_id="r1", engine="offline")
    release_all()  # as when the writing run has ended: the file is checkpointed and free
    return path


@pytest.fixture
def report_id(store: Path) -> str:
    return query_readonly(store, "SELECT report_id FROM reports")[1][0][0]


@pytest.fixture
def unwritable(store: Path) -> Iterator[Path]:
    """The store as a file nobody may write: immutable for root (chattr +i; root ignores
    file modes), mode 0444 for anyone else."""
    release_all()
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(
                ["chattr", "+i", str(store)], capture_output=True).returncode != 0:
            pytest.skip("root, and this file system cannot make a file immutable")
        try:
            yield store
        finally:
            subprocess.run(["chattr", "-i", str(store)], capture_output=True)
        return
    store.chmod(0o444)
    yield store
    store.chmod(0o644)


def terminal_controls(text: str) -> list[str]:
    """Control characters a terminal would act on (newline and tab are text)."""
    return sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0})
