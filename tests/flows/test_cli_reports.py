"""`researchflow show`, `search`, `export`, `query`, `verify` and `diff` through the CLI: what
print, their one-line errors and exit codes, and a store they never change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.models import Source
from core.store import ResultStore
from core.store.connection import release_all
from flows.cli import app
from flows.console import out
from tests.core.test_store_views import cite, topic_result

runner = CliRunner()
PAGE = Source(url="https://example.org/locks", title="File locks",
              text="DuckDB takes an exclusive lock when a process opens the file for writing.")


def run(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(out, "width", 200)  # whole ids and URLs in one line, to assert on


@pytest.fixture
def db(tmp_path: Path) -> Path:
    store = ResultStore(tmp_path / "rf.duckdb")
    store.save_result(topic_result(
        "DuckDB concurrency", title="Concurrency [/] in DuckDB",
        body="One writer at a time <script>alert(1)</script> [1].", sources=(PAGE,),
        citations=(cite(1, PAGE, "an exclusive lock"),)), run_id="r1", engine="offline")
    release_all()  # as when the writing run has ended: the file is checkpointed and free
    return store.path


def report_id(db: Path) -> str:
    return ResultStore(db).list_reports()[0]["report_id"]


def test_search_prints_a_table_of_hits(db: Path) -> None:
    result = run("search", "exclusive lock", "--db", str(db))
    assert result.exit_code == 0, result.output
    assert report_id(db) in result.output and "example.org/locks" in result.output
    assert "report" in result.output and "source" in result.output

    sources = run("search", "opens", "--kind", "sources", "--limit", "1", "--db", str(db))
    assert sources.exit_code == 0 and "example.org/locks" in sources.output
    assert report_id(db) not in sources.output


def test_search_errors_are_one_line(db: Path, tmp_path: Path) -> None:
    nothing = run("search", "xylophone", "--db", str(db))
    assert nothing.exit_code == 1 and "nothing in" in nothing.output
    assert "'xylophone'" in nothing.output
    no_words = run("search", "?!", "--db", str(db))
    assert no_words.exit_code == 2 and "no words" in no_words.output
    missing = run("search", "lock", "--db", str(tmp_path / "none.duckdb"))
    assert missing.exit_code == 2 and "no store" in missing.output
    assert not (tmp_path / "none.duckdb").exists()


def test_export_markdown_to_stdout_and_html_to_a_file(db: Path, tmp_path: Path) -> None:
    rid = report_id(db)
    md = run("export", rid, "--db", str(db))
    assert md.exit_code == 0
    assert md.output == ResultStore(db).get_report(rid)["markdown"]

    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    html = run("export", rid, "--format", "html", "-o", str(target), "--db", str(db))
    assert html.exit_code == 0 and "wrote" in html.output
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert '<a href="#ref-1" class="cite">[1]</a>' in page and 'id="ref-1"' in page


def test_export_writes_the_format_its_file_is_named_for(db: Path, tmp_path: Path) -> None:
    rid = report_id(db)
    pdf, docx = tmp_path / "report.pdf", tmp_path / "report.docx"
    assert run("export", rid, "-o", str(pdf), "--db", str(db)).exit_code == 0
    assert run("export", rid, "-o", str(docx), "--db", str(db)).exit_code == 0
    assert pdf.read_bytes().startswith(b"%PDF") and docx.read_bytes().startswith(b"PK")
    clash = run("export", rid, "-f", "md", "-o", str(tmp_path / "x.pdf"), "--db", str(db))
    assert clash.exit_code == 2 and "does not match" in clash.output
    assert not (tmp_path / "x.pdf").exists()


def test_export_unknown_report_says_how_to_list_them(db: Path, tmp_path: Path) -> None:
    result = run("export", "r_nope", "--db", str(db))
    assert result.exit_code == 2
    assert "no report 'r_nope'" in result.output and "researchflow query" in result.output
    bad_format = run("export", report_id(db), "--format", "rtf", "--db", str(db))
    assert bad_format.exit_code == 2
    missing = run("export", "r_x", "--db", str(tmp_path / "none.duckdb"))
    assert missing.exit_code == 2 and "no store" in missing.output


def test_query_reads_views_and_refuses_writes(db: Path) -> None:
    before = db.read_bytes()
    ok = run("query", "SELECT topic, title FROM latest_reports", "--db", str(db))
    assert ok.exit_code == 0 and "1 row(s)" in ok.output
    assert "Concurrency [/] in DuckDB" in ok.output  # stored text is printed, not read as markup
    for write in ("DELETE FROM reports", "INSERT INTO topics SELECT * FROM topics",
                  "CREATE TABLE x (a INT)"):
        refused = run("query", write, "--db", str(db))
        assert refused.exit_code == 2 and "read-only" in refused.output, refused.output
    assert db.read_bytes() == before
    assert run("query", "SELECT count(*) FROM reports", "--db", str(db)).exit_code == 0


def test_the_commands_do_not_hold_the_store(db: Path) -> None:
    assert run("search", "lock", "--db", str(db)).exit_code == 0
    assert run("export", report_id(db), "--db", str(db)).exit_code == 0
    store = ResultStore(db)  # a writer opens it straight after
    store.save_result(topic_result("Another topic", body="Zebras."), run_id="r2",
                      engine="offline")
    assert "Another topic" in run("search", "zebras", "--db", str(db)).output


def test_verify_checks_each_quote_against_the_version_it_cites(db: Path) -> None:
    """`verify` passes on a report whose page changed since (its version is kept), and names
    each quote that is not in the version it cites, one line each, exit 1."""
    first = report_id(db)
    changed = PAGE.model_copy(update={"text": "DuckDB now lets many processes read at once."})
    store = ResultStore(db)
    second = store.save_result(topic_result(
        "DuckDB readers", sources=(changed,),
        citations=(cite(1, changed, "many processes read"), cite(2, changed, "an exclusive lock"),
                   cite(3, Source(url="https://example.org/unread", title="U", text=""),
                        "never read"))), run_id="r2", engine="offline")
    release_all()
    before = db.read_bytes()
    ok = run("verify", first, "--db", str(db))
    assert ok.exit_code == 0, ok.output
    assert f"all 1 quote(s) of {first} found" in ok.output
    bad = run("verify", second, "--db", str(db))
    assert bad.exit_code == 1, bad.output
    lines = [line for line in bad.output.splitlines() if line.startswith("[")]
    assert len(lines) == 2
    assert lines[0].startswith(f"[2] {PAGE.url} @") and "quote not in source text" in lines[0]
    assert "“an exclusive lock”" in lines[0]
    assert lines[1].startswith("[3] https://example.org/unread @-: source not stored")
    assert "2 of 3 quote(s)" in bad.output
    missing = run("verify", "r_nope", "--db", str(db))
    assert missing.exit_code == 2 and "no report 'r_nope'" in missing.output
    assert db.read_bytes() == before  # read-only


def test_diff_with_one_report_compares_it_with_the_edition_before_it(tmp_path: Path) -> None:
    from tests.core.test_edition_order import save_edition

    store = ResultStore(tmp_path / "rf.duckdb")
    first = save_edition(store, "2026-12-01", 7)
    third = save_edition(store, "2026-12-03", 9)
    second = save_edition(store, "2026-12-02", 8)  # a backfill: the third's section is stale
    release_all()
    db = str(store.path)
    alone = run("diff", third, "--db", db, "--format", "json")
    assert alone.exit_code == 0, alone.output
    assert "compared again with " + second in alone.output
    data = json.loads(alone.stdout)
    assert data["previous"]["report_id"] == second and data["current"]["report_id"] == third
    assert data["counts"]["number_changed"] == 1
    assert run("diff", second, "--db", db, "--format", "json").exit_code == 0
    none = run("diff", first, "--db", db)
    assert none.exit_code == 1 and "first edition" in none.output
    for args in (("r_nope",), ("r_nope", third), (first, "r_nope")):
        unknown = run("diff", *args, "--db", db)
        assert unknown.exit_code == 2 and "no report 'r_nope'" in unknown.output, args


ZH_QUOTES = ("线程在等待网络数据时会阻塞当前线程，操作系统会切换到其他线程，"
             "每次切换都要保存和恢复寄存器。",
             "异步IO在等待网络数据时把控制权交还给事件循环，可以同时处理很多连接，"
             "而不需要为每个连接准备一个线程。")


def table_columns(output: str, headings: tuple[str, ...]) -> list[str]:
    """The text of each column of the first table under `headings` in rich output, its lines
    joined: cells are cut at the headings' positions counted in terminal cells (a CJK
    character is two)."""
    from rich.cells import cell_len

    lines = output.splitlines()
    top = next(i for i, line in enumerate(lines) if all(h in line for h in headings))
    starts = [cell_len(lines[top][:lines[top].index(h)]) for h in headings]
    columns = [""] * len(headings)
    for line in lines[top + 2:]:
        if not line.strip():
            break
        at, cells = 0, [""] * len(headings)
        for char in line:
            column = max(i for i, start in enumerate(starts) if at >= start or i == 0)
            cells[column] += char
            at += cell_len(char)
        columns = [c + cell.strip() for c, cell in zip(columns, cells)]
    return columns


@pytest.mark.parametrize("width", [80, 120])
def test_show_wraps_table_cells_and_loses_no_quoted_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    # rich cut a cell whose CJK run (one "word": no spaces) was wider than its column with "…".
    monkeypatch.setattr(out, "width", width)
    store = ResultStore(tmp_path / "rf.duckdb")
    body = ("| 维度 | 线程 | 异步 |\n|---|---|---|\n"
            f"| IO | {ZH_QUOTES[0]} [1] | {ZH_QUOTES[1]} [2] |")
    store.save_result(topic_result("线程和异步IO有什么区别？", title="线程和异步IO", body=body,
                                   language="zh"), run_id="r1", engine="offline")
    release_all()
    result = run("show", report_id(store.path), "--db", str(store.path))
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    _, threads, async_io = table_columns(result.output, ("维度", "线程", "异步"))
    assert threads.replace(" ", "") == ZH_QUOTES[0] + "[1]"
    assert async_io.replace(" ", "") == ZH_QUOTES[1] + "[2]"


def test_search_at_80_columns_keeps_each_report_id_on_one_line(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The id column was folded to 13 cells: "r_755054d8c5d" above "6", and "no report" after.
    monkeypatch.setattr(out, "width", 80)
    result = run("search", "exclusive lock", "--db", str(db))
    assert result.exit_code == 0, result.output
    assert report_id(db) in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_search_json_csv_and_ids_are_for_programs(tmp_path: Path) -> None:
    # Stored text is untrusted: a title with an escape sequence and markup, a C1 control.
    page = Source(url="https://example.org/locks", title="Locks \x1b]0;pwned\x07[bold]",
                  text="DuckDB takes an exclusive lock\x9b2J when a process writes.")
    store = ResultStore(tmp_path / "rf.duckdb")
    store.save_result(topic_result("DuckDB locks", title="Locks \x1b[2J[/] in DuckDB",
                                   body="An exclusive lock [1].", sources=(page,),
                                   citations=(cite(1, page, "an exclusive lock"),)),
                      run_id="r1", engine="offline")
    release_all()
    rid = report_id(store.path)

    found = run("search", "exclusive lock", "--json", "--db", str(store.path))
    assert found.exit_code == 0, found.output
    assert "\x1b" not in found.stdout and "\x9b" not in found.stdout
    hits = json.loads(found.stdout)
    assert {(h["kind"], h["report_id"], h["url"]) for h in hits} == {
        ("report", rid, None), ("source", None, "https://example.org/locks")}
    assert all(set(h) == {"kind", "report_id", "url", "title", "snippet", "score"}
               for h in hits)
    assert any(h["title"] == "Locks \x1b]0;pwned\x07[bold]" for h in hits)  # as stored
    assert json.loads(run("search", "exclusive", "--format", "json", "--kind", "reports",
                          "--db", str(store.path)).stdout)[0]["report_id"] == rid

    table = run("search", "exclusive lock", "--db", str(store.path))
    assert table.exit_code == 0 and "\x1b" not in table.stdout and "\x9b" not in table.stdout
    assert "[bold]" in table.stdout  # printed as text, not read as markup

    rows = run("search", "exclusive lock", "-f", "csv", "--db", str(store.path)).stdout
    assert rows.splitlines()[0] == "kind,report_id,url,title,snippet,score"
    ids = run("search", "exclusive lock", "-f", "ids", "--db", str(store.path))
    assert sorted(ids.stdout.splitlines()) == sorted([rid, "https://example.org/locks"])

    nothing = run("search", "xylophone", "--json", "--db", str(store.path))
    assert nothing.exit_code == 1 and json.loads(nothing.stdout) == []
    clash = run("search", "lock", "--json", "-f", "csv", "--db", str(store.path))
    assert clash.exit_code == 2 and "disagree" in clash.output


@pytest.mark.parametrize("width", [80, 120])
def test_query_tables_wrap_cells_instead_of_cutting_them(
        db: Path, monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    # A CJK run or a long URL wider than its column ended in "…", and values past 200
    # characters were cut without a sign.
    monkeypatch.setattr(out, "width", width)
    url = "https://example.org/" + "a-very-long-path-segment/" * 12
    quote = "".join(ZH_QUOTES) * 2
    for value in (quote, url):
        result = run("query", "SELECT ? AS value", "-p", value, "--db", str(db))
        assert result.exit_code == 0, result.output
        assert "…" not in result.output
        lines = result.output.splitlines()
        top = next(i for i, line in enumerate(lines) if "value" in line)
        cells = [line.strip().strip("│┃").strip() for line in lines[top + 2:]
                 if line.strip().startswith("│")]
        assert "".join(cells) == value, cells
        assert max(len(line) for line in lines) <= width
    long = run("query", "SELECT repeat('x', 5000) AS pad", "--db", str(db))
    assert "1 value(s) longer than 1000 characters shortened" in long.output
