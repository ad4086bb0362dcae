"""The CLI's errors: one line saying what to do, non-zero exit, no traceback."""

from __future__ import annotations


from typer.testing import CliRunner

from core.store import ResultStore
from flows.cli import app

runner = CliRunner()


def _run(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output
    return result


def test_missing_csv(tmp_path):
    result = _run("batch", str(tmp_path / "nope.csv"))
    assert result.exit_code == 2
    assert "no such file" in result.output and "topic" in result.output


def test_csv_without_topic_column(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("title,notes\na,b\n", encoding="utf-8")
    result = _run("batch", str(csv))
    assert result.exit_code == 2
    assert "no 'topic' column" in result.output


def test_missing_corpus_folder(tmp_path):
    result = _run("run", "anything at all", "--corpus", str(tmp_path / "missing"))
    assert result.exit_code == 2
    assert "no such folder" in result.output


def test_show_unknown_report(tmp_path):
    db = tmp_path / "s.duckdb"
    ResultStore(db)  # an empty but valid store
    result = _run("show", "r_doesnotexist", "--db", str(db))
    assert result.exit_code == 2
    assert "no report 'r_doesnotexist'" in result.output and "researchflow query" in result.output


def test_show_without_store(tmp_path):
    result = _run("show", "r_x", "--db", str(tmp_path / "none.duckdb"))
    assert result.exit_code == 2 and "no store" in result.output


def test_query_is_read_only(tmp_path):
    db = tmp_path / "s.duckdb"
    ResultStore(db)
    ok = _run("query", "SELECT count(*) AS n FROM reports", "--db", str(db))
    assert ok.exit_code == 0 and "1 row(s)" in ok.output
    refused = _run("query", "DROP TABLE reports", "--db", str(db))
    assert refused.exit_code == 2 and "error" in refused.output
    assert _run("query", "SELECT count(*) FROM reports", "--db", str(db)).exit_code == 0


def test_query_bad_sql(tmp_path):
    db = tmp_path / "s.duckdb"
    ResultStore(db)
    result = _run("query", "SELEC nonsense", "--db", str(db))
    assert result.exit_code == 2 and "query failed" in result.output
