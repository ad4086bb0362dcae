"""`researchflow mcp`: research and the stored reports for assistants, over the Model Context
Protocol (the official `mcp` SDK), on stdio or streamable HTTP.

Tools:
    research_topic(topic, ...)   start a topic (flows.mcp_runs): its run id, and its report id
                                 once it is done (`wait_seconds` waits that long for it)
    run_status(run_id)           the run's state, message and report id
    search_reports(text)         full-text search over stored reports (BM25, offline)
    get_report(report_id)        a report's markdown, references included
    list_reports(limit)          the newest reports
    query(sql, max_rows)         read-only SQL on the store, at most max_rows rows back
Resources:
    report://{report_id}         a report's markdown (text/markdown)

Everything a client sends is untrusted: SQL runs on a read-only connection, ids are looked up
as parameters, topic options are bounded as a CSV row's. A bad id, bad SQL or a failed start
comes back as a tool error (`isError`, one line saying what to do), never as a crash of the
server. The model, search backend, corpus and store are the server's own (its command line and
environment): a client cannot point research at another folder or file. Reads go through
core.store.reads.

Streamable HTTP has no authentication: it listens on loopback unless --allow-remote.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at run time.

import asyncio
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import Field

from flows.console import DbOpt, err, fail

log = logging.getLogger("researchflow.mcp")

INSTRUCTIONS = """researchflow: deep research with cited reports, stored in DuckDB.
Find what is already known with search_reports or list_reports and read it with get_report
(or the report://{report_id} resource). Start new research with research_topic; it returns a
run id at once: poll run_status until the status is COMPLETED, then get_report(report_id).
query runs read-only SQL (tables: reports, citations, sources, topics, subquestions,
findings, ledger; views: latest_reports, report_sources, usage_by_topic, ...; every table and
column is described in duckdb_tables() and duckdb_columns(), column comment)."""


def build_server(settings, runs) -> Any:
    """The MCPServer with researchflow's tools and resources (nothing runs until served)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError

    from core.models import MAX_TOPIC_CHARS, Topic, TopicOptions
    from core.store import StoreError, reads
    from flows.mcp_runs import RunNotFound

    from mcp.types import ToolAnnotations

    # What an assistant may assume of each tool: research starts work and reads the web or a
    # corpus; every other tool only reads the local store.
    starts = ToolAnnotations(read_only_hint=False, destructive_hint=False,
                              idempotent_hint=False, open_world_hint=True)
    reads_only = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                             idempotent_hint=True, open_world_hint=False)
    store = Path(settings.store_target())
    server = MCPServer("researchflow", instructions=INSTRUCTIONS, log_level="WARNING",
                       version="0.1.0")

    def read(call, *args, **kwargs):
        """A store read; a missing store or a store error is a tool error saying why."""
        if not str(store).startswith("ducklake:") and not store.exists():
            raise ToolError(f"no store at {store} yet: research a topic first")
        try:
            return call(*args, **kwargs)
        except StoreError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(description="Start researching a topic. Returns its run id at once (poll "
                 "run_status), or waits up to wait_seconds for the report id.",
                 annotations=starts)
    async def research_topic(
            topic: Annotated[str, Field(min_length=3, max_length=MAX_TOPIC_CHARS,
                                        description="What to research.")],
            options: Annotated[Optional[TopicOptions], Field(
                description="How deep to research and how to write (the CLI's options; a "
                            "batch CSV's columns); omitted fields keep their defaults.")] = None,
            wait_seconds: Annotated[float, Field(
                ge=0, le=600, description="Seconds to wait for the report before returning "
                "(0: return the run id at once and poll run_status).")] = 0
    ) -> dict[str, Any]:
        options = options or TopicOptions()
        try:
            Topic.of(topic, options)  # the flow's own checks
        except ValueError as exc:
            raise ToolError(f"bad topic: {exc}") from exc
        if options.review_plan and not runs.external_api:
            # The run would pause on a form in a UI nobody can open: it would only wait for
            # its timeout. With a server, it pauses there and run_status says PAUSED.
            raise ToolError("review_plan needs a Prefect server (PREFECT_API_URL) whose UI "
                            "shows the plan to review; start one, or leave review_plan off")
        with _prefect_errors():
            info = await asyncio.to_thread(runs.start, topic, options)
            waited = 0.0
            while wait_seconds and waited < wait_seconds and info.status not in _FINAL:
                await asyncio.sleep(min(1.0, wait_seconds - waited))
                waited += 1.0
                info = await asyncio.to_thread(runs.status, info.run_id)
        return asdict(info)

    @server.tool(description="The state of a run research_topic started: SCHEDULED, PENDING, "
                 "RUNNING, PAUSED (review_plan: its plan waits for approval in the Prefect "
                 "UI), COMPLETED (with report_id), FAILED (with message), CANCELLED.",
                 annotations=reads_only)
    async def run_status(run_id: Annotated[str, Field(
            min_length=1, max_length=100,
            description="The run_id research_topic returned.")]) -> dict[str, Any]:
        try:
            with _prefect_errors():
                return asdict(await asyncio.to_thread(runs.status, run_id))
        except RunNotFound as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(description="Full-text search over stored reports (any of the words; rarer "
                 "words and more of them rank higher). Returns report ids with snippets.",
                 annotations=reads_only)
    def search_reports(text: Annotated[str, Field(
                           min_length=1, max_length=500,
                           description="Words to look for, in any language.")],
                       limit: Annotated[int, Field(
                           ge=1, le=100, description="The most hits to return.")] = 10
                       ) -> list[dict[str, Any]]:
        try:
            hits = read(reads.search_reports, store, text, cache_dir=settings.cache_dir,
                        limit=limit)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc
        return [{"report_id": h.key, "title": h.title, "snippet": h.snippet,
                 "score": round(h.score, 4)} for h in hits]

    @server.tool(description="A stored report as markdown, with its numbered references "
                 "(url and verbatim quote each).", annotations=reads_only)
    def get_report(report_id: Annotated[str, Field(
            min_length=1, max_length=100,
            description="A report id (r_...), from search_reports, list_reports or "
                        "run_status.")]) -> str:
        found = read(reads.report, store, report_id)
        if found is None:
            raise ToolError(f"no report {report_id!r}; list_reports or search_reports "
                            "gives the ids")
        return found.markdown

    @server.tool(description="The newest stored reports: id, topic, title, engine, when, "
                 "number of citations.", annotations=reads_only)
    def list_reports(limit: Annotated[int, Field(
            ge=1, le=200, description="How many of the newest reports.")] = 20
            ) -> list[dict[str, Any]]:
        return [asdict(r) for r in read(reads.list_reports, store, limit)]

    @server.tool(description="Read-only SQL (DuckDB dialect) on the store; a statement that "
                 "would change it is refused. At most max_rows rows come back.",
                 annotations=reads_only)
    def query(sql: Annotated[str, Field(
                  min_length=1, max_length=20_000,
                  description="One read-only SQL statement, e.g. SELECT report_id, title "
                              "FROM latest_reports.")],
              max_rows: Annotated[int, Field(
                  ge=1, le=reads.MAX_ROWS, description="The most rows to return.")] = 100
              ) -> dict[str, Any]:
        columns, rows, truncated = read(reads.query, store, sql, max_rows)
        kept = _within_bytes(rows, MAX_RESULT_BYTES - len(json.dumps(columns, default=str)))
        result: dict[str, Any] = {"columns": columns, "rows": kept,
                                  "truncated": truncated or len(kept) < len(rows)}
        if len(kept) < len(rows):
            result["note"] = (f"cut at {MAX_RESULT_BYTES // 1000} kB after {len(kept)} of "
                              f"{len(rows)} rows: select fewer or shorter columns")
        return result

    @server.resource("report://{report_id}", name="report", mime_type="text/markdown",
                     description="A stored report's markdown, references included.")
    def report_resource(report_id: str) -> str:
        try:
            found = read(reads.report, store, report_id)
        except ToolError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        if found is None:
            raise ResourceNotFoundError(f"no report {report_id!r}")
        return found.markdown

    return server


_FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@contextmanager
def _prefect_errors() -> Iterator[None]:
    """The Prefect API down or refusing: a tool error naming it, not a crash."""
    import httpx
    from mcp.server.mcpserver.exceptions import ToolError
    from prefect.exceptions import PrefectHTTPStatusError

    from flows.local_api import LocalApiError
    from flows.mcp_runs import RunNotFound

    try:
        yield
    except (ToolError, RunNotFound):
        raise
    except LocalApiError as exc:  # else the client reads only "Error executing tool ..."
        raise ToolError(f"{exc}; try again, or start a Prefect server (`make ui`) and set "
                        "PREFECT_API_URL") from exc
    except (httpx.HTTPError, PrefectHTTPStatusError, OSError) as exc:
        from prefect.settings import PREFECT_API_URL

        where = PREFECT_API_URL.value() or "the local Prefect API"
        raise ToolError(f"{where} did not answer ({type(exc).__name__}: {str(exc)[:200]}); "
                        "start the server (`make ui`) or unset PREFECT_API_URL") from exc


def mcp(http: Optional[str] = typer.Option(None, "--http", metavar="HOST:PORT",
                                           help="Serve streamable HTTP at http://HOST:PORT/mcp "
                                           "instead of stdio."),
        allow_remote: bool = typer.Option(False, "--allow-remote",
                                          help="Let --http listen on a non-loopback address "
                                          "(there is no authentication)."),
        deployment: str = typer.Option("research-topic/adhoc-served", "--deployment",
                                       envvar="RESEARCHFLOW_MCP_DEPLOYMENT",
                                       help="With PREFECT_API_URL: run topics as runs of this "
                                       "deployment when it exists."),
        model: Optional[str] = typer.Option(None, "--model", help="As for `run`."),
        search: Optional[str] = typer.Option(None, "--search", help="As for `run`."),
        corpus: Optional[Path] = typer.Option(None, "--corpus", help="As for `run`."),
        db: Optional[Path] = DbOpt) -> None:
    """Serve research and the stored reports to assistants over MCP (stdio by default)."""
    from core.settings import Settings
    from flows.console import prefect_env
    from flows.mcp_runs import TopicRuns

    if corpus is not None and not corpus.is_dir():
        fail(f"{corpus}: no such folder; --corpus takes a folder of documents")
    address = _address(http, allow_remote) if http else None
    external_api = bool(os.environ.get("PREFECT_API_URL"))
    prefect_env()
    settings = Settings.load(model=model, search=search, corpus_dir=corpus, db_path=db)
    store = Path(settings.store_target())

    def stored(report_id: str) -> bool:
        from core.store import StoreError, reads

        try:
            return reads.report(store, report_id) is not None
        except StoreError:
            return False

    runs = TopicRuns(settings, deployment=deployment or None, external_api=external_api,
                     store_has=stored)
    server = build_server(settings, runs)
    # The SDK puts a handler on the root logger without a level of its own: Prefect's run
    # loggers would print every INFO line through it. Warnings and errors only (on stderr).
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.WARNING)
    try:
        if address is None:
            server.run("stdio")
        else:
            host, port = address
            _free(host, port)
            shown = f"[{host}]" if ":" in host else host
            err.print(f"researchflow MCP at http://{shown}:{port}/mcp (streamable HTTP); "
                      "Ctrl-C stops it", highlight=False)
            server.run("streamable-http", host=host, port=port)
    finally:
        runs.close()


# What one query answer may weigh: an assistant's context is the budget, and the SDK sends a
# result twice (as text and as structured content).
MAX_RESULT_BYTES = 100_000


def _within_bytes(rows: list, budget: int) -> list:
    """The leading rows whose JSON fits in `budget` bytes."""
    kept, used = [], 0
    for row in rows:
        used += len(json.dumps(row, default=str, ensure_ascii=False).encode()) + 1
        if used > budget:
            break
        kept.append(row)
    return kept


def _free(host: str, port: int) -> None:
    """One line instead of uvicorn's traceback and exit 3 when the port is taken (another
    server may still take it between this check and the bind: uvicorn then says so itself)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            fail(f"{host}:{port} is in use or cannot be listened on ({exc.strerror}); pick "
                 "another port with --http HOST:PORT")


def _address(http: str, allow_remote: bool) -> tuple[str, int]:
    host, _, port = http.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        fail(f"--http {http}: give HOST:PORT, e.g. 127.0.0.1:8765")
    loopback = host == "localhost"
    try:
        loopback = loopback or ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not loopback and not allow_remote:
        fail(f"--http {http}: {host} is not a loopback address and the MCP endpoint has no "
             "authentication; pass --allow-remote to listen there anyway")
    return host, int(port)
