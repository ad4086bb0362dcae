"""MCP work is bounded (issue 35, item 5): twelve `research_topic` calls at the largest options
were all accepted within 20 s and all ran, and over `--http` any local process could start
them with no credential."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from core.models import TopicOptions
from core.settings import Settings


class _Researching:
    """A worker process that never ends (none is started)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def poll(self) -> None:
        return None


def test_topics_past_the_cap_are_refused_busy(tmp_path: Path, monkeypatch) -> None:
    from flows import mcp_runs

    monkeypatch.setattr(mcp_runs.subprocess, "Popen", _Researching)
    settings = Settings.load(cache_dir=tmp_path, model="offline", mcp_max_queued=3)
    runs = mcp_runs.TopicRuns(settings, deployment=None, external_api=False)
    for n in range(3):
        assert runs.start(f"what is lock number {n}", TopicOptions()).status == "PENDING"
    with pytest.raises(mcp_runs.Busy, match="busy.*try later"):
        runs.start("what is lock number 4", TopicOptions())
    assert len(list((tmp_path / "mcp-runs").glob("*.json"))) == 3
    # A run that ended frees its place.
    record = next((tmp_path / "mcp-runs").glob("*.json"))
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "status": "COMPLETED"}))
    assert runs.start("what is lock number 4", TopicOptions()).status == "PENDING"


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_http_with_a_token_refuses_requests_without_it(tmp_path: Path) -> None:
    from tests.fakes.mcp_http import mcp_over_http

    token = "rf-mcp-token-5f1e2d3c4b5a"
    env = {**os.environ, "RESEARCHFLOW_MCP_TOKEN": token, "RESEARCHFLOW_CACHE_DIR": str(tmp_path),
           "RESEARCHFLOW_MODEL": "offline"}
    with mcp_over_http(["--db", str(tmp_path / "store.duckdb")], env=env, cwd=tmp_path,
                       log=tmp_path / "mcp.log") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        anonymous = httpx.post(url, json=INITIALIZE, headers=HEADERS, timeout=10)
        assert anonymous.status_code == 401, anonymous.text
        wrong = httpx.post(url, json=INITIALIZE, timeout=10,
                           headers={**HEADERS, "authorization": "Bearer nope"})
        assert wrong.status_code == 401
        allowed = httpx.post(url, json=INITIALIZE, timeout=10,
                             headers={**HEADERS, "authorization": f"Bearer {token}"})
        assert allowed.status_code == 200, allowed.text
        assert token not in (tmp_path / "mcp.log").read_text()
