"""The MCP tools in-process (the SDK's in-memory client): failures that must be tool errors.

A Prefect API that does not answer and a topic the options refuse are errors the assistant can
read (`isError`, one line saying what to do), never a crash of the tool or the server.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mcp import Client

from core.settings import Settings
from flows.mcp_runs import TopicRuns
from flows.mcp_server import build_server


def call(server, *calls: tuple[str, dict]) -> list:
    async def session() -> list:
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return asyncio.run(session())


@pytest.mark.slow  # the Prefect client retries a refused connection for ~15 s
def test_an_unreachable_prefect_api_is_a_tool_error(tmp_path: Path) -> None:
    from prefect.settings import (PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES,
                                  temporary_settings)

    settings = Settings.load(db_path=tmp_path / "store.duckdb")
    runs = TopicRuns(settings, deployment="research-topic/adhoc-served", external_api=True)
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api",
                                     PREFECT_CLIENT_MAX_RETRIES: 0}):
        started, status = call(build_server(settings, runs),
                               ("research_topic", {"topic": "What is asyncio?"}),
                               ("run_status", {"run_id": "00000000-0000-0000-0000-000000000001"}))
    for result in (started, status):
        assert result.is_error
        assert "http://127.0.0.1:9/api did not answer" in result.content[0].text
        assert "PREFECT_API_URL" in result.content[0].text


def test_refused_options_and_a_missing_store_are_tool_errors(tmp_path: Path) -> None:
    settings = Settings.load(db_path=tmp_path / "none.duckdb")
    runs = TopicRuns(settings, deployment=None, external_api=False)
    language, pages, listed = call(
        build_server(settings, runs),
        ("research_topic", {"topic": "What is asyncio?", "options": {"language": "klingon-xx"}}),
        ("research_topic", {"topic": "What is asyncio?", "options": {"max_pages": 99}}),
        ("list_reports", {}))
    assert language.is_error and "unknown language" in language.content[0].text
    assert pages.is_error and "max_pages" in pages.content[0].text
    assert listed.is_error and "no store at" in listed.content[0].text

    async def resources():
        async with Client(build_server(settings, runs)) as client:
            return (await client.list_resources()).resources, \
                (await client.list_prompts()).prompts

    listed_resources, prompts = asyncio.run(resources())
    assert listed_resources == []  # no store yet: nothing to list, and no error
    assert prompts[0].arguments[0].description.startswith("What to research")
    assert not (tmp_path / "none.duckdb").exists()  # reading never creates a store


def test_a_plan_review_without_a_ui_to_review_it_is_a_tool_error(tmp_path: Path) -> None:
    # Without PREFECT_API_URL nobody could open the paused run's form: the run would only
    # wait for its timeout, so the tool says so instead of starting it.
    settings = Settings.load(db_path=tmp_path / "none.duckdb")
    runs = TopicRuns(settings, deployment=None, external_api=False)
    (reviewed,) = call(build_server(settings, runs), ("research_topic", {
        "topic": "What is asyncio?", "options": {"review_plan": True}}))
    assert reviewed.is_error and "review_plan needs a Prefect server" in reviewed.content[0].text
    assert not runs._workers  # nothing was started


def test_a_research_process_that_died_is_crashed_naming_its_output(tmp_path: Path) -> None:
    # The detached worker writes its record until it ends; killed before that, the record
    # still says RUNNING, and the run must not stay RUNNING forever in every later session.
    import subprocess
    import sys

    from flows.local_api import _started
    from flows.mcp_runs import runs_dir, write_record

    settings = Settings.load(db_path=tmp_path / "none.duckdb", cache_dir=tmp_path / "cache")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    started = _started(gone.pid)
    gone.wait()
    folder = runs_dir(settings)
    folder.mkdir(parents=True)
    run_id = "00000000-0000-0000-0000-0000000000aa"
    write_record(folder / f"{run_id}.json", {
        "run_id": run_id, "topic": "What is asyncio?", "status": "RUNNING", "created": 0,
        "pid": gone.pid, "pid_started": started, "log": "/x/run.log"})
    runs = TopicRuns(settings, deployment=None, external_api=False)
    (status,) = call(build_server(settings, runs), ("run_status", {"run_id": run_id}))
    assert not status.is_error
    assert status.structured_content["status"] == "CRASHED"
    assert "/x/run.log" in status.structured_content["message"]


class SlowRuns:
    """Runs that complete on the third look, as a real one after a while."""

    external_api = False

    def __init__(self) -> None:
        self.looks = 0

    def start(self, topic, options):
        from flows.mcp_runs import RunInfo

        return RunInfo(run_id="00000000-0000-0000-0000-000000000001", status="PENDING",
                       how="detached", topic=topic)

    def status(self, run_id):
        from flows.mcp_runs import RunInfo

        self.looks += 1
        status = "COMPLETED" if self.looks >= 3 else "RUNNING"
        return RunInfo(run_id=run_id, status=status, how="detached", topic="t",
                       report_id="r_1" if status == "COMPLETED" else None)


def test_waiting_sends_progress_and_log_messages(tmp_path: Path) -> None:
    # wait_seconds=120 once blocked 30 s in silence: the client hears how the wait goes.
    settings = Settings.load(db_path=tmp_path / "none.duckdb")
    progress, logs = [], []

    async def on_progress(done, total, message) -> None:
        progress.append((done, total, message))

    async def on_log(params) -> None:
        logs.append(params.data)

    async def session():
        async with Client(build_server(settings, SlowRuns()), logging_callback=on_log,
                          log_level="info") as client:
            tool = next(t for t in (await client.list_tools()).tools
                        if t.name == "research_topic")
            assert "ctx" not in tool.input_schema["properties"]
            return await client.call_tool("research_topic", {
                "topic": "What is asyncio?", "wait_seconds": 30}, progress_callback=on_progress)

    result = asyncio.run(session())
    assert not result.is_error and result.structured_content["status"] == "COMPLETED"
    assert len(progress) >= 3 and all(total == 30 for _, total, _ in progress), progress
    assert progress[0][2].startswith("PENDING") and "COMPLETED" in progress[-1][2]
    assert any("research started" in line for line in logs), logs
    assert any("COMPLETED" in line for line in logs), logs


def test_arguments_the_schema_refuses_are_one_line_naming_the_field(tmp_path: Path) -> None:
    # They were pydantic's report: several lines, the model's name, a link per error.
    settings = Settings.load(db_path=tmp_path / "none.duckdb")
    runs = TopicRuns(settings, deployment=None, external_api=False)
    short, waits, missing = call(
        build_server(settings, runs), ("research_topic", {"topic": "x"}),
        ("research_topic", {"topic": "What is asyncio?", "wait_seconds": 9999}),
        ("query", {}))
    for result in (short, waits, missing):
        text = result.content[0].text
        assert result.is_error and "\n" not in text and "pydantic" not in text, text
        assert "Arguments" not in text and "input_value" not in text, text
    assert short.content[0].text == ("invalid arguments for research_topic: topic: String "
                                     "should have at least 3 characters")
    assert "wait_seconds: Input should be less than or equal to 600" in waits.content[0].text
    assert missing.content[0].text == "invalid arguments for query: sql: Field required"
    assert not runs._workers


def test_the_options_schema_speaks_to_the_model_not_the_developer(tmp_path: Path) -> None:
    # It showed TopicOptions' docstring: "declared once, here ... flows.options builds them".
    settings = Settings.load(db_path=tmp_path / "none.duckdb")

    async def schema() -> dict:
        async with Client(build_server(settings, TopicRuns(
                settings, deployment=None, external_api=False))) as client:
            tools = (await client.list_tools()).tools
            return next(t for t in tools if t.name == "research_topic").input_schema

    found = asyncio.run(schema())
    text = json.dumps(found)
    for developer in ("declared once", "flows.options", "batch CSV", "docstring"):
        assert developer not in text, developer
    described = found["$defs"]["TopicOptions"]["description"]
    assert described.startswith("How deep to research the topic and how to write the report")


def test_a_topic_already_under_way_is_found_not_started_twice(tmp_path: Path) -> None:
    # A later session asking for the same topic finds the run an earlier one started.
    import os

    from flows.local_api import _started
    from flows.mcp_runs import runs_dir, write_record

    settings = Settings.load(db_path=tmp_path / "none.duckdb", cache_dir=tmp_path / "cache")
    folder = runs_dir(settings)
    folder.mkdir(parents=True)
    run_id = "00000000-0000-0000-0000-0000000000bb"
    write_record(folder / f"{run_id}.json", {  # this process stands in for its worker
        "run_id": run_id, "topic": "What is asyncio?", "status": "RUNNING", "created": 0,
        "pid": os.getpid(), "pid_started": _started(os.getpid()), "log": "/x/run.log",
        "parameters": {"db_path": str((tmp_path / "none.duckdb").resolve())}})
    runs = TopicRuns(settings, deployment=None, external_api=False)
    (again,) = call(build_server(settings, runs),
                    ("research_topic", {"topic": "What is asyncio?"}))
    assert not again.is_error
    assert again.structured_content["run_id"] == run_id
    assert again.structured_content["status"] == "RUNNING"
    assert "already under way" in again.structured_content["message"]
    assert not runs._workers  # nothing new was started
    other = tmp_path / "other.duckdb"  # the same topic into another store is another run
    assert runs.under_way("What is asyncio?", str(other.resolve())) is None
