"""`research_topic` over MCP with a Prefect server that has the topic deployment.

A real `prefect server start`, `researchflow serve` (which creates and runs the
`research-topic/adhoc-served` deployment) and `researchflow mcp` on stdio, all with
PREFECT_API_URL set as a user's shell would: the topic becomes a run of the deployment (not a
flow run of the MCP server's process), the served process carries it out into the store the
MCP server reads, and run_status reports it COMPLETED with its report id.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.flows.test_deployment_server import BIN, Api, Background, _env
from tests.flows.test_mcp_server import data

# The session's server (tests/conftest.py), on the worker that runs test_deployment_server:
# both serve `research-topic/adhoc-served` there.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("deployments")]


def test_a_topic_runs_as_the_served_deployment(tmp_path: Path, corpus: Path,
                                               prefect_server: str) -> None:
    store = tmp_path / "store.duckdb"
    api = prefect_server
    Api(api).forget("research-topic", "adhoc-served")  # one an earlier test served
    env = _env(api, tmp_path, RESEARCHFLOW_CACHE_DIR=str(tmp_path / "cache"))
    serve = [str(BIN / "researchflow"), "serve", "--db", str(store)]
    with Background(serve, cwd=tmp_path, env=env, log=tmp_path / "serve.log") as served:
        Api(api).deployment("research-topic", "adhoc-served")
        params = StdioServerParameters(
            command=str(BIN / "researchflow"),
            args=["mcp", "--db", str(store), "--corpus", str(corpus), "--model", "offline"],
            env=env, cwd=str(tmp_path))

        async def session() -> dict:
            async with Client(params, read_timeout_seconds=120) as client:
                started = data(await client.call_tool("research_topic", {
                    "topic": "How do threads share memory?",
                    "options": {"max_subquestions": 2, "max_rounds": 1, "max_waves": 1}}))
                assert started["how"] == "deployment", started
                deadline = time.monotonic() + 240
                status = started
                while status["status"] not in ("COMPLETED", "FAILED", "CRASHED",
                                               "CANCELLED"):
                    assert time.monotonic() < deadline, (status, served.tail())
                    await asyncio.sleep(1)
                    status = data(await client.call_tool(
                        "run_status", {"run_id": started["run_id"]}))
                assert status["status"] == "COMPLETED", (status, served.tail())
                report = await client.call_tool("get_report",
                                                {"report_id": status["report_id"]})
                assert not report.is_error and "## References" in report.content[0].text
                return status

        status = asyncio.run(session())
    assert status["run_id"] and status["report_id"].startswith("r_")
