"""`show`, `search`, `export`: they never write (a read-only store works, a DuckDB file that is
not a store is left as it was: defect 12), never overwrite (defect 8), print text as text
(no rich markup: defect 9; no terminal escape sequences: defect 10), and fail in one line
(defect 15)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from core.store import StoreError
from core.store import query as store_query
from tests.security.conftest import MARKUP, cli, digest, terminal_controls


def _one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


# -- defect 8: export never overwrites the store, nor any DuckDB file ---------------------------

def test_export_over_the_store_is_refused_even_with_force(store: Path, report_id: str) -> None:
    before = digest(store)
    for force in ([], ["--force"]):
        _one_line_error(cli("export", report_id, "--db", str(store), "-o", str(store), *force))
    assert digest(store) == before


def test_export_over_another_duckdb_file_is_refused_even_with_force(
        store: Path, report_id: str, tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE mine AS SELECT 42 AS a").close()
    before = digest(other)
    _one_line_error(cli("export", report_id, "--db", str(store), "-o", str(other), "--force"))
    assert digest(other) == before


def test_export_replaces_an_existing_file_only_with_force(store: Path, report_id: str,
                                                          tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text("mine", encoding="utf-8")
    _one_line_error(cli("export", report_id, "--db", str(store), "-o", str(page), "-f", "html"))
    assert page.read_text(encoding="utf-8") == "mine"
    done = cli("export", report_id, "--db", str(store), "-o", str(page), "-f", "html", "--force")
    assert done.exit_code == 0 and page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# -- defect 9: user text is never rich markup ----------------------------------------------------

def test_show_of_a_markup_id_is_one_line(store: Path) -> None:
    line = _one_line_error(cli("show", "[/]", "--db", str(store)))
    assert "no report '[/]'" in line


def test_markup_in_stored_text_prints_as_written(store: Path, report_id: str) -> None:
    shown = cli("show", report_id, "--db", str(store))
    assert shown.exit_code == 0 and "[bold red]x[/]" in shown.output
    queried = cli("query", "SELECT topic, title FROM reports", "--db", str(store))
    assert queried.exit_code == 0 and MARKUP in queried.output
    found = cli("search", "exclusive lock", "--db", str(store))
    assert found.exit_code == 0 and "[bold red]x[/]" in found.output


def test_markup_in_a_path_prints_as_written(tmp_path: Path) -> None:
    line = _one_line_error(cli("show", "r_x", "--db", str(tmp_path / "[/]x.duckdb")))
    assert "[/]x.duckdb" in line


# -- defect 10: no terminal escape sequence reaches the terminal ---------------------------------

@pytest.mark.parametrize("command", [
    ["show", "{id}"], ["show", "{id}", "--raw"], ["search", "exclusive lock"],
    ["search", "lock", "--kind", "sources"],
    ["query", "SELECT text FROM sources"], ["query", "SELECT quote FROM citations"],
    ["query", "SELECT markdown FROM reports", "--format", "json"], ["export", "{id}"],
])
def test_page_text_reaches_the_terminal_without_control_characters(
        store: Path, report_id: str, command: list[str]) -> None:
    result = cli(*(part.format(id=report_id) for part in command), "--db", str(store))
    assert result.exit_code == 0, result.output
    assert terminal_controls(result.output) == []
    if "json" not in command:  # JSON keeps the text as data, its controls escaped
        assert "pwned-title" not in result.output  # the window title's text goes with it


# -- defect 12: read paths never write, and work on a read-only file -----------------------------

def _tables(path: Path) -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT (SELECT count(*) FROM duckdb_tables()) + "
                           "(SELECT count(*) FROM duckdb_views() WHERE NOT internal)").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("command", [["show", "r_x"], ["export", "r_x"], ["search", "lock"],
                                     ["query", "SELECT 1"]])
def test_a_foreign_duckdb_file_is_left_alone_with_one_line(tmp_path: Path,
                                                          command: list[str]) -> None:
    foreign = tmp_path / "theirs.duckdb"
    duckdb.connect(str(foreign)).execute("CREATE TABLE mine AS SELECT 42 AS a").close()
    before = digest(foreign)
    line = _one_line_error(cli(*command, "--db", str(foreign)))
    assert "not a researchflow store" in line
    assert _tables(foreign) == 1 and digest(foreign) == before


def test_show_search_and_export_work_on_a_read_only_store(unwritable: Path,
                                                         report_id: str) -> None:
    before = digest(unwritable)
    for command in (["show", report_id], ["export", report_id], ["search", "exclusive lock"],
                    ["query", "SELECT count(*) FROM reports"]):
        result = cli(*command, "--db", str(unwritable))
        assert result.exit_code == 0, (command, result.output)
    assert digest(unwritable) == before


# -- defect 15: nothing a user can cause prints a traceback --------------------------------------

def test_a_folder_or_a_text_file_as_the_store_is_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n", encoding="utf-8")
    for db in (tmp_path, text):
        for command in (["show", "r_x"], ["query", "SELECT 1"], ["export", "r_x"]):
            _one_line_error(cli(*command, "--db", str(db)))


def test_run_refuses_a_store_it_cannot_use_before_prefect_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.cli

    def no_prefect() -> None:
        raise AssertionError("Prefect started for a --db that can never be a store")

    monkeypatch.setattr(flows.cli, "ensure_api", no_prefect)
    foreign = tmp_path / "theirs.duckdb"
    duckdb.connect(str(foreign)).execute("CREATE TABLE mine AS SELECT 42 AS a").close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n", encoding="utf-8")
    for db in (foreign, text, tmp_path):
        _one_line_error(cli("run", "How does asyncio cancel a task?", "--db", str(db)))
    assert _tables(foreign) == 1


def test_a_topic_too_long_fails_before_prefect_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.cli

    def no_prefect() -> None:
        raise AssertionError("Prefect started for a topic that cannot run")

    monkeypatch.setattr(flows.cli, "ensure_api", no_prefect)
    line = _one_line_error(cli("run", "How does asyncio cancel a task? " + "x" * 2000))
    assert "2000 characters" in line


def test_an_unexpected_error_is_one_line_and_debug_shows_it(
        store: Path, report_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store_query, "read_report", broken)
    line = _one_line_error(cli("export", report_id, "--db", str(store)), code=1)
    assert "disk on fire" in line and "--debug" in line
    from typer.testing import CliRunner

    from flows.cli import app

    debug = CliRunner().invoke(app, ["--debug", "export", report_id, "--db", str(store)])
    assert isinstance(debug.exception, RuntimeError)


def test_store_errors_are_one_line(tmp_path: Path) -> None:
    foreign = tmp_path / "theirs.duckdb"
    duckdb.connect(str(foreign)).execute("CREATE TABLE mine AS SELECT 42 AS a").close()
    with pytest.raises(StoreError) as info:
        store_query.query_readonly(foreign, "SELECT * FROM reports")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("force", [(), ("--force",)])
def test_export_to_a_named_pipe_is_refused_at_once(store: Path, report_id: str, tmp_path: Path,
                                                   force: tuple[str, ...]) -> None:
    """Issue 35 (10): `export -o` to a named pipe blocked forever (--force opened it to look
    for a DuckDB header, then to write); -o writes a regular file or a new path."""
    import os
    import subprocess

    from tests.security.conftest import researchflow

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    try:
        done = researchflow("export", report_id, "--db", str(store), "-o", str(pipe), *force,
                            timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("export blocked on the named pipe")
    assert done.returncode == 2, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "not a regular file" in lines[0], done.stderr
