"""The MCP tools in-process (the SDK's in-memory client): failures that must be tool errors.

A Prefect API that does not answer and a topic the options refuse are errors the assistant can
read (`isError`, one line saying what to do), never a crash of the tool or the server.
"""

from __future__ import annotations

import asyncio
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
    assert not (tmp_path / "none.duckdb").exists()  # reading never creates a store


def test_a_plan_review_without_a_ui_to_review_it_is_a_tool_error(tmp_path: Path) -> None:
    # Without PREFECT_API_URL nobody could open the paused run's form: the run would only
    # wait for its timeout, so the tool says so instead of starting it.
    settings = Settings.load(db_path=tmp_path / "none.duckdb")
    runs = TopicRuns(settings, deployment=None, external_api=False)
    (reviewed,) = call(build_server(settings, runs), ("research_topic", {
        "topic": "What is asyncio?", "options": {"review_plan": True}}))
    assert reviewed.is_error and "review_plan needs a Prefect server" in reviewed.content[0].text
    assert not runs._local  # nothing was started


def test_a_local_api_that_does_not_start_is_a_tool_error_saying_why(tmp_path: Path,
                                                                      monkeypatch) -> None:
    # Without PREFECT_API_URL the server starts its own API on the first topic; on a loaded
    # machine it may not answer in time. The client must read why, not only "Error executing
    # tool research_topic" (the SDK's text for an exception it does not know).
    from flows import local_api

    def slow(timeout: float = 120.0) -> None:
        raise local_api.LocalApiError("the local Prefect API did not answer within 120 s "
                                      "(its output: /x/server-1.log)")

    monkeypatch.setattr(local_api, "ensure_api", slow)
    settings = Settings.load(db_path=tmp_path / "none.duckdb")
    runs = TopicRuns(settings, deployment=None, external_api=False)
    (started,) = call(build_server(settings, runs),
                      ("research_topic", {"topic": "What is asyncio?"}))
    assert started.is_error
    text = started.content[0].text
    assert "did not answer within 120 s" in text and "PREFECT_API_URL" in text, text
    assert not runs._local
