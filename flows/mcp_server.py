"""`researchflow mcp`: research and the stored reports for assistants, over the Model Context
Protocol (the official `mcp` SDK), on stdio or streamable HTTP.

Tools:
    research_topic(topic, ...)   start a topic (flows.mcp_runs): its run id, and its report id
                                 once it is done (`wait_seconds` waits that long for it); the
                                 research outlives this server and its client
    run_status(run_id)           the run's state, message and report id, in any session
    search_reports(text, kind)   full-text search over stored reports and their sources (BM25,
                                 offline)
    get_report(report_id)        a report's markdown, references included
    list_reports(limit)          the newest reports
    query(sql, max_rows)         read-only SQL on the store, at most max_rows rows back
Resources:
    report://{report_id}         a report's markdown (text/markdown); resources/list names the
                                 newest LISTED_REPORTS stored reports
Prompts:
    research_and_summarise(topic)  research (or find) a topic and summarise its report

Everything a client sends is untrusted: SQL runs on a read-only connection, ids are looked up
as parameters, topic options are bounded as a CSV row's. A bad id, bad SQL or a failed start
comes back as a tool error (`isError`, one line saying what to do), never as a crash of the
server. The model, search backend, corpus and store are the server's own (its command line and
environment): a client cannot point research at another folder or file. Reads go through
core.store.reads.

Streamable HTTP listens on loopback unless --allow-remote; with RESEARCHFLOW_MCP_TOKEN set, every
request must carry `Authorization: Bearer <token>` (BearerOnly), else it is answered 401.
"""

# No `from __future__ import annotations`: the SDK reads the tools' annotations at run time.

import asyncio
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer
from pydantic import Field

from core import secrets
from flows.console import DbOpt, check_store, err, fail

log = logging.getLogger("researchflow.mcp")

INSTRUCTIONS = """researchflow: deep research with cited reports, stored in DuckDB.
Find what is already known with search_reports or list_reports and read it with get_report
(or the report://{report_id} resource). Start new research with research_topic; it returns a
run id at once: poll run_status until the status is COMPLETED, then get_report(report_id).
The research goes on when this session ends: a later session finds it by run id
(run_status) or, once stored, by its topic (search_reports, list_reports).
query runs read-only SQL (tables: reports, citations, sources, topics, subquestions,
findings, ledger; views: latest_reports, report_sources, usage_by_topic, ...; every table and
column is described in duckdb_tables() and duckdb_columns(), column comment)."""


def build_server(settings, runs) -> Any:
    """The MCPServer with researchflow's tools and resources (nothing runs until served)."""
    from mcp.server.mcpserver import Context, MCPServer
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
    from mcp.types import Resource
    from pydantic import ValidationError

    store = Path(settings.store_target())

    class Server(MCPServer):
        async def list_resources(self) -> list[Resource]:
            """The template's resources as concrete ones: the newest stored reports, so a
            client that lists resources sees them (a template alone lists nothing)."""
            try:
                newest = await asyncio.to_thread(read, reads.list_reports, store, LISTED_REPORTS)
            except ToolError:  # no store yet: nothing to list
                newest = []
            return await super().list_resources() + [
                Resource(uri=f"report://{r.report_id}", name=r.report_id,
                         title=r.title or r.topic, mime_type="text/markdown",
                         description=f"{r.topic}: {r.engine} report of {r.created_at[:10]}, "
                                     f"{r.citations} citations")
                for r in newest]

        async def call_tool(self, name, arguments, context=None):
            """Arguments the schema refuses: one line naming each field and what it needs,
            not pydantic's report (its model's name, the input echoed, a link per error)."""
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                raise ToolError(f"invalid arguments for {name}: "
                                f"{_one_line(exc.__cause__)}") from exc.__cause__

    server = Server("researchflow", instructions=INSTRUCTIONS, log_level="WARNING",
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
                description="How deep to research and how to write the report; omitted "
                            "fields keep their defaults.")] = None,
            wait_seconds: Annotated[float, Field(
                ge=0, le=600, description="Seconds to wait for the report before returning "
                "(0: return the run id at once and poll run_status).")] = 0,
            ctx: Context = None,  # type: ignore[assignment]  # the SDK's, for progress
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
            await _tell(ctx, f"research started: run {info.run_id} ({info.status})")
            began = time.monotonic()
            while wait_seconds and info.status not in _FINAL:
                waited = time.monotonic() - began
                if waited >= wait_seconds:
                    break
                # The client sees the wait go on (and may show it), not a silent call.
                await ctx.report_progress(round(waited, 1), wait_seconds,
                                          f"{info.status} after {waited:.0f} s")
                await asyncio.sleep(min(1.0, wait_seconds - waited))
                before, info = info.status, await asyncio.to_thread(runs.status, info.run_id)
                if info.status != before:
                    await _tell(ctx, f"run {info.run_id}: {info.status}"
                                + (f" ({info.message})" if info.message else ""))
            if wait_seconds:
                await ctx.report_progress(round(time.monotonic() - began, 1), wait_seconds,
                                          f"{info.status}: returning")
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

    @server.tool(description="Full-text search over stored reports and the sources they were "
                 "researched from (any of the words; rarer words and more of them rank "
                 "higher). Returns report ids (read with get_report) or source URLs, with "
                 "snippets.", annotations=reads_only)
    def search_reports(text: Annotated[str, Field(
                           min_length=1, max_length=500,
                           description="Words to look for, in any language.")],
                       limit: Annotated[int, Field(
                           ge=1, le=100, description="The most hits to return.")] = 10,
                       kind: Annotated[Literal["all", "reports", "sources"], Field(
                           description="What to search: reports, the sources' text "
                                       "(pages and documents read during research), or "
                                       "all of both.")] = "all"
                       ) -> list[dict[str, Any]]:
        try:
            hits = read(reads.search_reports, store, text, cache_dir=settings.cache_dir,
                        limit=limit, kind=kind)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc
        return [{"kind": h.kind, "report_id": h.key if h.kind == "report" else None,
                 "url": h.key if h.kind != "report" else None, "title": h.title,
                 "snippet": h.snippet, "score": round(h.score, 4)} for h in hits]

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

    @server.prompt(name="research_and_summarise", title="Research a topic and summarise it",
                   description="Research a topic with researchflow (or reuse a stored report) "
                               "and summarise the report, keeping its citations.")
    def research_and_summarise(topic: Annotated[str, Field(
            description="What to research, as a question or a topic.")]) -> str:
        return (f"Research this with researchflow and summarise the report: {topic}\n\n"
                "1. search_reports for it; if a stored report answers it, read it with "
                "get_report.\n"
                "2. Otherwise call research_topic with this topic (wait_seconds up to 600), "
                "then poll run_status until COMPLETED and read get_report(report_id).\n"
                "3. Summarise the report in a few short paragraphs, keeping its citation "
                "markers [n], and end with the cited sources (title and URL). Say where the "
                "report finds its evidence thin rather than filling the gap.")

    return server


def _one_line(error) -> str:
    """A pydantic ValidationError as `field: what it needs; ...` on one line."""
    parts = []
    for e in error.errors(include_url=False):
        where = ".".join(str(p) for p in e["loc"]) or "arguments"
        parts.append(f"{where}: {' '.join(str(e['msg']).split())}")
    return "; ".join(parts)


LISTED_REPORTS = 200  # resources/list: the newest reports (older ones: search_reports, query)

_FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


async def _tell(ctx, message: str) -> None:
    """A log message to the client (notifications/message, level info). MCP deprecated logging
    (SEP-2577) but clients still show it; progress notifications carry the same news."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await ctx.log("info", message, logger_name="researchflow")


@contextmanager
def _prefect_errors() -> Iterator[None]:
    """The Prefect API down or refusing: a tool error naming it, not a crash. Prefect is
    imported only when something failed: a detached start never loads it (seconds)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from flows.mcp_runs import Busy, RunNotFound

    try:
        yield
    except (ToolError, RunNotFound):
        raise
    except Busy as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        import httpx
        from prefect.exceptions import PrefectHTTPStatusError

        from flows.local_api import LocalApiError

        if isinstance(exc, LocalApiError):  # else the client reads "Error executing tool"
            raise ToolError(f"{exc}; try again, or start a Prefect server (`make ui`) and "
                            "set PREFECT_API_URL") from exc
        if not isinstance(exc, (httpx.HTTPError, PrefectHTTPStatusError, OSError)):
            raise
        from prefect.settings import PREFECT_API_URL

        where = PREFECT_API_URL.value() or "the local Prefect API"
        raise ToolError(f"{where} did not answer ({type(exc).__name__}: {str(exc)[:200]}); "
                        "start the server (`make ui`) or unset PREFECT_API_URL") from exc


def mcp(http: Optional[str] = typer.Option(None, "--http", metavar="HOST:PORT",
                                           help="Serve streamable HTTP at http://HOST:PORT/mcp "
                                           "instead of stdio."),
        allow_remote: bool = typer.Option(False, "--allow-remote",
                                          help="Let --http listen on a non-loopback address "
                                          "(set RESEARCHFLOW_MCP_TOKEN to require a bearer "
                                          "token)."),
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
    check_store(store)

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
            token = os.environ.get(TOKEN_ENV, "").strip()
            err.print(f"researchflow MCP at http://{shown}:{port}/mcp (streamable HTTP"
                      f"{', bearer token from ' + TOKEN_ENV if token else ''}); "
                      "Ctrl-C stops it", highlight=False)
            if not token:
                server.run("streamable-http", host=host, port=port)
            else:
                _serve_with_token(server, host, port, token)
    finally:
        runs.close()


TOKEN_ENV = "RESEARCHFLOW_MCP_TOKEN"


class BearerOnly:
    """An ASGI app that passes on only HTTP requests carrying `Authorization: Bearer <token>`
    (compared in constant time); anything else is answered 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        import hmac

        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body",
                            "body": b"a bearer token is required (" + TOKEN_ENV.encode()
                            + b")\n"})
                return
        await self.app(scope, receive, send)


def _serve_with_token(server: Any, host: str, port: int, token: str) -> None:
    """The SDK's streamable-HTTP app behind BearerOnly, on uvicorn as the SDK runs it."""
    import uvicorn

    secrets.remember(token)
    app = BearerOnly(server.streamable_http_app(host=host), token)
    uvicorn.run(app, host=host, port=port, log_level="warning")


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
