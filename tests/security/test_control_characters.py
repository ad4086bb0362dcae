"""Topics with raw control characters (ESC, BEL, NUL) are refused with one line, from the
command line, a CSV and MCP; a reviewer's typed sub-question loses them (issue 35, item 10:
all were accepted and stored)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.security.conftest import cli

HOSTILE = ["What is \x1b]0;pwned\x07 a lock?", "Threads \x1b[2J\x1b[31mred\x1b[0m share memory",
           "Cut\x00 here and there"]


@pytest.mark.parametrize("topic", HOSTILE)
def test_run_refuses_a_topic_with_control_characters(tmp_path: Path, topic: str) -> None:
    result = cli("run", topic, "--model", "offline", "--db", str(tmp_path / "store.duckdb"))
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "control characters" in lines[0], result.output
    assert not (tmp_path / "store.duckdb").exists()


def test_a_csv_row_with_control_characters_is_invalid_and_the_others_run(tmp_path: Path) -> None:
    from core.topics.rows import read_topics_csv

    csv = tmp_path / "topics.csv"
    csv.write_text("topic\nHow do locks work?\n" + "".join(f'"{t}"\n' for t in HOSTILE),
                   encoding="utf-8")
    good, bad = read_topics_csv(csv, batch_id="b")
    assert [r.topic.text for r in good] == ["How do locks work?"]
    assert len(bad) == 3 and all("control characters" in e.message for e in bad), bad


def test_mcp_refuses_a_topic_with_control_characters(tmp_path: Path) -> None:
    from mcp import Client

    from core.settings import Settings
    from flows.mcp_runs import TopicRuns
    from flows.mcp_server import build_server

    settings = Settings.load(db_path=tmp_path / "store.duckdb", cache_dir=tmp_path)
    runs = TopicRuns(settings, deployment=None, external_api=False)

    async def session() -> list:
        async with Client(build_server(settings, runs)) as client:
            return [await client.call_tool("research_topic", {"topic": t}) for t in HOSTILE]

    for result in asyncio.run(session()):
        assert result.is_error and "control characters" in result.content[0].text
    assert not (tmp_path / "mcp-runs").exists() or not list((tmp_path / "mcp-runs").glob("*"))


def test_a_reviewed_sub_question_loses_its_control_characters() -> None:
    from core.topics.plan_edits import PlannedQuestion

    edited = PlannedQuestion(question="What \x1b]0;pwned\x07 is\x00 a lock?",
                             searches=["lock \x1b[31mred"])
    assert edited.question == "What is a lock?"
    assert edited.searches == ["lock red"]
