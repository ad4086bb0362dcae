"""The README's *Past one machine* at the command line: a lake in --help, hints that paste as
one argument, one-line errors for a bad RESEARCHFLOW_STORE, a blank one meaning no lake."""

from __future__ import annotations

import shlex

import pytest
from typer.testing import CliRunner

from core.store import ResultStore
from flows.cli import _db_hint, app

runner = CliRunner()
LAKE = "ducklake:postgres:dbname=researchflow host=db.example port=5432 user=rf"


@pytest.mark.parametrize("command", ["run", "batch", "query", "show", "search", "export"])
def test_help_names_the_lake(command):
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "RESEARCHFLOW_STORE" in text and "ducklake:postgres:dbname=" in text


def test_a_lake_hint_pastes_as_one_argument():
    hint = _db_hint(LAKE)
    assert shlex.split(hint) == ["--db", LAKE]


def test_a_bad_store_variable_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RESEARCHFLOW_STORE", "postgres:dbname=rf")
    result = runner.invoke(app, ["query", "SELECT 1"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "RESEARCHFLOW_STORE" in lines[0] and "ducklake:" in lines[0]
    assert "ValidationError" not in lines[0] and "pydantic" not in lines[0]


def test_a_blank_store_variable_means_no_lake(tmp_path, monkeypatch):
    db = tmp_path / "store.duckdb"
    ResultStore(db)  # created by researchflow, so read paths open it
    monkeypatch.setenv("RESEARCHFLOW_STORE", "")
    result = runner.invoke(app, ["query", "SELECT 41 + 1 AS answer", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "42" in result.output
