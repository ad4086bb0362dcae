"""`researchflow query` can only read the store: no statement of a user's writes a file, opens
another database, reads the machine, changes a setting or installs anything (defect 1), a big
answer is cut, not built (defect 1), and `ducklake:` means a lake only as typed (defect 16)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.store import query_readonly
from core.store.connection import release_all
from tests.security.conftest import cli, digest


def _refused(result) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output


def test_copy_over_the_store_is_refused_and_the_store_is_intact(store: Path) -> None:
    before = digest(store)
    _refused(cli("query", f"COPY (SELECT 'pwned' AS x) TO '{store}' (HEADER false)",
                 "--db", str(store)))
    assert digest(store) == before
    assert query_readonly(store, "SELECT count(*) FROM reports")[1] == [(1,)]


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO '{dir}/evil.sh'",
    "EXPORT DATABASE '{dir}/dump'",
    "ATTACH '{dir}/other.duckdb' AS o (READ_WRITE); CREATE TABLE o.t AS SELECT 42",
    "ATTACH '{dir}/other.duckdb' AS o (READ_WRITE)",
])
def test_statements_that_write_files_are_refused(store: Path, tmp_path: Path, sql: str) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    _refused(cli("query", sql.format(dir=tmp_path), "--db", str(store)))
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM read_csv('/etc/passwd')",
])
def test_the_machine_cannot_be_read(store: Path, sql: str) -> None:
    result = cli("query", sql, "--db", str(store))
    _refused(result)
    assert "root:" not in result.output and "nologin" not in result.output


@pytest.mark.parametrize("sql", [
    "SET threads = 1", "SET enable_external_access = true", "CALL pragma_version()",
    "PRAGMA threads = 1", "CREATE TEMP TABLE t AS SELECT 1", "INSTALL httpfs", "LOAD httpfs",
    "DELETE FROM reports", "DROP TABLE reports", "CHECKPOINT",
])
def test_anything_but_a_query_is_refused_with_one_line(store: Path, sql: str) -> None:
    _refused(cli("query", sql, "--db", str(store)))
    assert query_readonly(store, "SELECT count(*) FROM reports")[1] == [(1,)]


def test_queries_of_every_kind_still_run(store: Path) -> None:
    for sql in ("SELECT count(*) AS n FROM reports", "FROM latest_reports",
                "WITH t AS (SELECT 1 AS a) SELECT * FROM t", "DESCRIBE reports",
                "SHOW TABLES", "EXPLAIN SELECT 1"):
        result = cli("query", sql, "--db", str(store))
        assert result.exit_code == 0, (sql, result.output)


def test_a_million_rows_are_cut_to_the_limit_and_say_so(store: Path) -> None:
    result = cli("query", "SELECT * FROM range(1000000)", "--db", str(store))
    assert result.exit_code == 0, result.output
    assert "999999" not in result.output  # never built, never printed
    assert "1000 row(s) shown" in result.output and "--limit" in result.output


def test_a_query_past_its_time_limit_is_stopped(store: Path) -> None:
    result = cli("query", "SELECT count(*) FROM range(1000000000000)", "--timeout", "1",
                 "--db", str(store))
    _refused(result)
    assert "time limit" in result.output


def test_every_row_as_csv_or_json(store: Path) -> None:
    as_csv = cli("query", "SELECT range AS n FROM range(5000)", "--format", "csv",
                 "--db", str(store))
    assert as_csv.exit_code == 0 and as_csv.output.splitlines()[0] == "n"
    assert len(as_csv.output.splitlines()) == 5001
    as_json = cli("query", "SELECT range AS n FROM range(3)", "--format", "json",
                  "--db", str(store))
    assert json.loads(as_json.output) == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_parameters_are_values_never_sql(store: Path) -> None:
    evil = "x' OR '1'='1"
    result = cli("query", "SELECT count(*) AS n FROM reports WHERE batch_id = ?",
                 "--param", evil, "--format", "json", "--db", str(store))
    assert result.exit_code == 0 and json.loads(result.output) == [{"n": 0}]
    assert query_readonly(store, "SELECT count(*) FROM reports WHERE batch_id = ?",
                          ["b1"])[1] == [(1,)]


def test_a_lake_gets_the_same_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb_extension_ducklake")
    monkeypatch.setenv("RESEARCHFLOW_LAKE_DATA_PATH", str(tmp_path / "data") + "/")
    target = f"ducklake:{tmp_path / 'catalog.ducklake'}"
    # Written by another process, as a lake is: this one attaches it read-only.
    subprocess.run([sys.executable, "-c", "import sys; from core.store import ResultStore; "
                    "ResultStore(sys.argv[1]).start_run('r1', 'b1', 'offline', 'corpus', {})",
                    target], check=True, timeout=120)
    assert cli("query", "SELECT count(*) FROM runs", "--db", target).exit_code == 0
    _refused(cli("query", f"COPY (SELECT 1) TO '{tmp_path}/evil.csv'", "--db", target))
    _refused(cli("query", "SELECT * FROM read_text('/etc/passwd')", "--db", target))
    _refused(cli("query", "INSERT INTO runs SELECT * FROM runs", "--db", target))
    assert not (tmp_path / "evil.csv").exists()


def test_a_folder_named_ducklake_is_a_folder(store: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "ducklake:dir"
    folder.mkdir()
    (folder / "x.duckdb").write_bytes(store.read_bytes())
    release_all()
    monkeypatch.chdir(tmp_path)
    result = cli("query", "SELECT count(*) AS n FROM reports", "--format", "json",
                 "--db", "./ducklake:dir/x.duckdb")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{"n": 1}]
    shown = cli("query", "SELECT count(*) FROM reports", "--db", str(folder / "x.duckdb"))
    assert shown.exit_code == 0, shown.output


def test_a_pragma_cannot_install_an_extension_while_it_is_parsed(store: Path) -> None:
    """Issue 35 (2): parsing expanded `create_fts_index` on DuckDB's default connection, which
    tried to download the fts extension before the allow-list saw the statement."""
    result = cli("query", "PRAGMA create_fts_index('reports','report_id','markdown')",
                 "--db", str(store))
    _refused(result)
    assert "download" not in result.output.lower() and "http" not in result.output.lower()
    assert "INSTALL" not in result.output


@pytest.fixture
def planted_dump(tmp_path: Path) -> Path:
    """A folder another user could write: import_database would run its SQL."""
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "schema.sql").write_text("CREATE TABLE pwned(x INT);\n")
    (dump / "load.sql").write_text("INSERT INTO pwned VALUES (1);\n")
    return dump


def test_import_database_never_reads_a_folder_and_shows_no_stack_trace(
        store: Path, planted_dump: Path) -> None:
    """Issue 35 (2): the folder's schema.sql was read while parsing, and DuckDB's INTERNAL
    Error arrived with a C++ stack trace naming the install paths."""
    result = cli("query", f"PRAGMA import_database('{planted_dump}')", "--db", str(store))
    _refused(result)
    for leak in ("Stack Trace", "INTERNAL", ".so(", "site-packages"):
        assert leak not in result.output, result.output
    assert "file system operations are disabled" in result.output  # never opened


def test_an_mcp_client_gets_the_same_one_line(store: Path, planted_dump: Path) -> None:
    from core.store import StoreError
    from core.store.reads import query

    with pytest.raises(StoreError) as caught:
        query(store, f"PRAGMA import_database('{planted_dump}')")
    message = str(caught.value)
    assert "\n" not in message and "Stack Trace" not in message and "INTERNAL" not in message
