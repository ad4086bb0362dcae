"""`researchflow mcp` driven by the MCP SDK's own client, as an assistant drives it.

Over stdio the command runs from the venv as a subprocess, its store holding one report: the
client lists the tools, finds the report by a word in it, reads it back as a tool result and as
a resource, lists and queries the store, and gets tool errors (never a dead server) for a bad
id, a bad run id, bad SQL, a write and a bad topic. Another client starts research offline over
a small corpus and exits at once: the research goes on in a process of its own, and a new
session finds its run and its report. Over streamable HTTP the same command serves a loopback
port.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from core.store import ResultStore
from core.store.connection import release_all
from tests.core.test_store_views import cite, topic_result
from tests.flows.test_cli_reports import PAGE, run

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
TOOLS = {"research_topic", "run_status", "search_reports", "get_report", "list_reports", "query"}


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    db = ResultStore(tmp_path / "store.duckdb")
    db.save_result(topic_result(
        "DuckDB concurrency", title="Concurrency in DuckDB",
        body="One writer at a time holds the exclusive lock [1].", sources=(PAGE,),
        citations=(cite(1, PAGE, "an exclusive lock"),)), run_id="r1", engine="offline")
    release_all()
    return db.path


def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    out.update(PREFECT_HOME=str(tmp_path / "prefect"), RESEARCHFLOW_CACHE_DIR=str(
        tmp_path / "cache"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return out


def data(result) -> object:
    """A tool's structured result (a list comes wrapped as {"result": [...]})."""
    assert not result.is_error, result.content
    out = result.structured_content
    if out is None:
        return json.loads(result.content[0].text)
    return out["result"] if set(out) == {"result"} else out


def error(result) -> str:
    assert result.is_error
    return result.content[0].text


async def read_back(client: Client) -> str:
    """Find the stored report by a word in it and read it: its id."""
    tools = (await client.list_tools()).tools
    assert TOOLS <= {t.name for t in tools}
    for tool in tools:  # what an assistant reads before it calls: hints, and every parameter
        assert tool.annotations is not None and tool.annotations.read_only_hint is not None
        assert tool.annotations.read_only_hint == (tool.name != "research_topic"), tool.name
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}({name}) has no description"
    hits = data(await client.call_tool("search_reports", {"text": "exclusive",
                                                          "kind": "reports"}))
    assert len(hits) == 1 and hits[0]["title"] == "Concurrency in DuckDB"
    report_id = hits[0]["report_id"]
    # The sources too: a page's own words, which the report does not quote.
    sources = data(await client.call_tool("search_reports", {"text": "opens"}))
    assert [(h["kind"], h["url"]) for h in sources] == [("source", PAGE.url)], sources
    both = data(await client.call_tool("search_reports", {"text": "exclusive lock"}))
    assert {h["kind"] for h in both} == {"report", "source"}
    got = await client.call_tool("get_report", {"report_id": report_id})
    assert not got.is_error
    markdown = got.content[0].text
    assert "exclusive lock" in markdown and PAGE.url in markdown  # its references too
    return report_id


def test_stdio_tools_resources_and_errors(store: Path, corpus: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=str(BIN / "researchflow"),
        args=["mcp", "--db", str(store), "--corpus", str(corpus), "--model", "offline"],
        env=env(tmp_path), cwd=str(tmp_path))

    async def session() -> None:
        async with Client(params, read_timeout_seconds=300) as client:
            report_id = await read_back(client)
            resource = await client.read_resource(f"report://{report_id}")
            assert "exclusive lock" in resource.contents[0].text
            listed = (await client.list_resources()).resources  # the stored reports, by URI
            assert [(str(r.uri), r.title, r.mime_type) for r in listed] == [
                (f"report://{report_id}", "Concurrency in DuckDB", "text/markdown")]
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["research_and_summarise"]
            assert prompts[0].arguments[0].name == "topic" and prompts[0].arguments[0].required
            asked = await client.get_prompt("research_and_summarise",
                                            {"topic": "DuckDB concurrency"})
            said = asked.messages[0].content.text
            assert "DuckDB concurrency" in said and "research_topic" in said
            assert "get_report" in said and "summarise" in said.lower()
            listed = data(await client.call_tool("list_reports", {"limit": 5}))
            assert [r["report_id"] for r in listed] == [report_id]
            rows = data(await client.call_tool("query", {
                "sql": "SELECT number, url FROM citations UNION ALL SELECT 2, 'x'",
                "max_rows": 1}))
            assert rows["columns"] == ["number", "url"] and rows["truncated"] is True
            assert rows["rows"] == [[1, PAGE.url]]
            heavy = data(await client.call_tool("query", {
                "sql": "SELECT i, repeat('x', 1000) AS pad FROM range(1000) t(i)",
                "max_rows": 1000}))  # about 1 MB: cut by bytes, and said
            assert heavy["truncated"] is True and 0 < len(heavy["rows"]) < 100
            assert "cut at 100 kB" in heavy["note"]

            assert "no report 'r_nope'" in error(
                await client.call_tool("get_report", {"report_id": "r_nope"}))
            assert "syntax error" in error(
                await client.call_tool("query", {"sql": "SELEC * FROM reports"}))
            assert "read-only" in error(
                await client.call_tool("query", {"sql": "DELETE FROM reports"}))
            assert "not a run id" in error(
                await client.call_tool("run_status", {"run_id": "'; DROP TABLE x"}))
            assert "research_topic never returned it" in error(await client.call_tool(
                "run_status", {"run_id": "00000000-0000-0000-0000-000000000000"}))
            assert error(await client.call_tool("research_topic", {"topic": "x"}))
            with pytest.raises(Exception, match="no report"):
                await client.read_resource("report://r_nope")

    asyncio.run(session())


def test_streamable_http_serves_the_same_tools(store: Path, tmp_path: Path) -> None:
    from tests.fakes.mcp_http import mcp_over_http

    with mcp_over_http(["--db", str(store)], env=env(tmp_path), cwd=tmp_path,
                       log=tmp_path / "mcp.log") as port:
        async def session() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await read_back(client)
                assert "no report" in error(
                    await client.call_tool("get_report", {"report_id": "r_missing"}))

        asyncio.run(session())
        said = (tmp_path / "mcp.log").read_text()
        assert f"researchflow MCP at http://127.0.0.1:{port}/mcp" in said, said


def test_a_port_in_use_is_one_line(store: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = run("mcp", "--http", f"127.0.0.1:{port}", "--db", str(store))
    assert refused.exit_code == 2, refused.output
    assert f"127.0.0.1:{port} is in use" in refused.output
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1


def test_http_refuses_a_remote_address_without_allow_remote(store: Path) -> None:
    refused = run("mcp", "--http", "0.0.0.0:8765", "--db", str(store))
    assert refused.exit_code == 2 and "--allow-remote" in refused.output
    malformed = run("mcp", "--http", "localhost", "--db", str(store))
    assert malformed.exit_code == 2 and "HOST:PORT" in malformed.output


@pytest.fixture()
def workers_end(tmp_path: Path):
    """A research process this test started and left running (the test failed) is ended: it
    leads a session of its own, so its process group is its own."""
    yield
    import signal

    from flows.local_api import _started

    for path in (tmp_path / "cache" / "mcp-runs").glob("*.json"):
        record = json.loads(path.read_text())
        pid = record.get("pid")
        if pid and _started(pid) == record.get("pid_started"):
            try:
                os.killpg(pid, signal.SIGTERM)
            except OSError:
                pass


def test_research_outlives_the_client_that_started_it(store: Path, corpus: Path,
                                                      tmp_path: Path, shared_prefect,
                                                      workers_end) -> None:
    """A client starts research and exits at once (its server with it); a new session finds
    the run by its id and the report by the topic's words, and the store has the run."""
    shared_prefect.seed(tmp_path / "prefect")
    params = StdioServerParameters(
        command=str(BIN / "researchflow"),
        args=["mcp", "--db", str(store), "--corpus", str(corpus), "--model", "offline"],
        env=env(tmp_path), cwd=str(tmp_path))

    async def start() -> tuple[dict, float]:
        async with Client(params, read_timeout_seconds=300) as client:
            began = time.monotonic()
            started = data(await client.call_tool("research_topic", {
                "topic": "How do threads share memory?",
                "options": {"max_subquestions": 2, "max_rounds": 1, "max_waves": 1}}))
            return started, time.monotonic() - began

    started, took = asyncio.run(start())
    print(f"research_topic answered in {took:.1f} s: {started}")
    assert started["status"] in ("PENDING", "SCHEDULED", "RUNNING") and started["report_id"] is None
    assert took < 10, f"the first call took {took:.1f} s"  # it says it returns at once

    async def later() -> None:
        async with Client(params, read_timeout_seconds=300) as client:
            deadline = time.monotonic() + 240
            status = data(await client.call_tool("run_status", {"run_id": started["run_id"]}))
            while status["status"] not in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                assert time.monotonic() < deadline, status
                await asyncio.sleep(1)
                status = data(await client.call_tool("run_status",
                                                      {"run_id": started["run_id"]}))
            assert status["status"] == "COMPLETED", status
            hits = data(await client.call_tool("search_reports", {"text": "threads memory"}))
            assert status["report_id"] in [h["report_id"] for h in hits]
            new = await client.call_tool("get_report", {"report_id": status["report_id"]})
            assert not new.is_error and "## References" in new.content[0].text

    asyncio.run(later())
    release_all()
    import duckdb

    with duckdb.connect(str(store), read_only=True) as con:
        topics = [t for (t,) in con.execute("SELECT topic FROM topics").fetchall()]
        runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert "How do threads share memory?" in topics and runs >= 1
