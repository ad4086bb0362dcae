"""A batch of hostile rows and a topic that fails, through the installed command against a real
Prefect API: bad CSV rows are isolated and recorded (defect 13), an apostrophe in the batch id
(defect 14), markup in topics (defect 9), no traceback on the terminal (defect 15), escaped
artifacts and an honest progress artifact (defects 11, 17), a hint that names the store
(defect 17)."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Iterator

import pytest

from core.store import query_readonly
from tests.security.conftest import PLANTED, researchflow

pytestmark = pytest.mark.usefixtures("prefect_harness")

TOPICS = {
    "markup": "[/] How does asyncio cancel a task?",
    "planted": f"{PLANTED} How does asyncio cancel a task?",
}
CORPUS = {
    "asyncio.md": "# Asyncio\n\nAsyncio cancels a task by raising CancelledError inside the "
                  "coroutine. A task cancelled while it waits stops at its next await. "
                  "Cancellation in asyncio is cooperative, so a coroutine may catch it.\n",
    "json.md": "# JSON\n\nJSON (JavaScript Object Notation) <https://json.org> is a subset of "
               "JavaScript syntax. Asyncio tasks often return JSON.\n",
}
BATCH = "o'brien"


def _api_env() -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return {"PREFECT_API_URL": str(PREFECT_API_URL.value())}


@pytest.fixture(scope="module")
def hostile_batch(tmp_path_factory: pytest.TempPathFactory):
    """One batch run of every kind of bad row beside two good ones."""
    folder = tmp_path_factory.mktemp("hostile-batch")
    corpus = folder / "corpus"
    corpus.mkdir()
    for name, text in CORPUS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    csv = folder / "topics.csv"
    csv.write_bytes(b"topic,max_waves,colour\n"
                    + f'"{TOPICS["markup"]}",1,red\n'.encode()
                    + f'"{TOPICS["planted"]}",2,blue\n'.encode()
                    + b"How does asyncio gather work?,99,green\n"          # row 4: bad option
                    + b"bad \xff byte topic here,1,grey\n"                 # row 5: not UTF-8
                    + b'"' + b"y" * 200_000 + b'",1,white\n')              # row 6: oversized
    db = folder / "store.duckdb"
    done = researchflow("batch", str(csv), "--batch-id", BATCH, "--max-rounds", "1",
                        "--corpus", str(corpus), "--db", str(db), env=_api_env())
    return done, db


def test_bad_rows_are_isolated_and_recorded_as_invalid(hostile_batch) -> None:
    done, db = hostile_batch
    assert done.returncode == 1, done.stdout + done.stderr  # some rows have no report
    _, rows = query_readonly(db, "SELECT status, topic, error FROM topics ORDER BY status, topic")
    statuses = [status for status, _, _ in rows]
    assert statuses.count("succeeded") == 2 and statuses.count("invalid") == 3, rows
    errors = {topic[:40]: error for status, topic, error in rows if status == "invalid"}
    assert any("max_waves" in e for e in errors.values())
    assert any("not UTF-8" in e for e in errors.values())
    assert any("characters" in e for e in errors.values())


def test_the_closing_table_lists_every_row(hostile_batch) -> None:
    done, db = hostile_batch
    table = done.stdout
    assert "[/] How" in table  # markup printed as written, not read as a tag
    assert "[click](javascript:alert(1))" in table
    assert table.count("invalid") >= 3 and "max_waves" in table
    assert "not UTF-8" in table
    assert f"--db {db}" in table.split("researchflow show REPORT_ID", 1)[1].splitlines()[0]


def test_unknown_columns_are_warned_about(hostile_batch) -> None:
    done, _ = hostile_batch
    assert "colour" in done.stderr and "not read" in done.stderr


def test_no_traceback_reaches_the_terminal(hostile_batch) -> None:
    done, _ = hostile_batch
    assert "Traceback" not in done.stdout + done.stderr
    assert "MarkupError" not in done.stdout + done.stderr


def _artifacts(db) -> list:
    """The artifacts of the batch stored in `db` and of its topics' subflows: on the session's
    shared server, an unfiltered read returns a page of everyone's."""
    from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId,
                                                FlowRunFilter, FlowRunFilterParentFlowRunId)

    from tests.flows.prefect_api import _ask

    _, rows = query_readonly(db, "SELECT run_id FROM runs")
    batch_runs = [r for (r,) in rows]

    async def read(client):
        children = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=batch_runs)))
        ids = batch_runs + [str(c.id) for c in children]
        return await client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=ids)))

    return _ask(read)


def test_artifacts_hold_the_planted_topic_as_text(hostile_batch) -> None:
    from markdown_it import MarkdownIt

    done, db = hostile_batch
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    mine = [a for a in _artifacts(db) if a.type in ("markdown", "table", "progress")]
    planted = [a for a in mine if "javascript" in json.dumps(a.data) + (a.description or "")]
    assert planted, "the planted topic reached no artifact"
    for artifact in planted:
        for text in (a for a in (artifact.description,
                                 artifact.data if artifact.type == "markdown" else None) if a):
            html = md.render(text)
            assert 'href="javascript' not in html and "<img" not in html, text[:300]
        if artifact.type == "table":
            for row in json.loads(artifact.data) if isinstance(artifact.data, str) else \
                    artifact.data:
                for cell in row.values():
                    if isinstance(cell, str):
                        html = md.render(cell)
                        assert 'href="javascript' not in html and "<img" not in html, cell


def test_the_table_artifact_names_invalid_rows_and_progress_tells_the_truth(
        hostile_batch) -> None:
    done, db = hostile_batch
    shown = _artifacts(db)
    tables = [a for a in shown if a.type == "table" and (a.key or "").startswith("batch-o")]
    assert tables, "no batch table artifact"
    data = tables[0].data
    rows = json.loads(data) if isinstance(data, str) else data
    invalid = [r for r in rows if r["status"] == "invalid"]
    assert len(invalid) == 3 and all(r["topic"] for r in invalid), invalid
    progress = [a for a in shown if a.type == "progress"
                and a.flow_run_id == tables[0].flow_run_id]
    assert progress and all("1/1" not in (a.description or "") for a in progress)
    assert any("invalid" in (a.description or "") for a in progress), [
        a.description for a in progress]


class _RefusingProvider(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible server that refuses every key."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps({"error": {"message": "Incorrect API key provided",
                                     "type": "invalid_request_error",
                                     "code": "invalid_api_key"}}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def refusing_provider() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RefusingProvider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_a_failed_topic_is_one_line_and_debug_shows_the_traceback(
        refusing_provider: str, tmp_path: Path) -> None:
    env = {**_api_env(), "OPENAI_API_KEY": "sk-test-not-a-key",
           "OPENAI_BASE_URL": refusing_provider}
    args = ("run", "How does asyncio cancel a task?", "--model", "openai:gpt-5.4-mini",
            "--max-waves", "1", "--max-rounds", "1", "--db", str(tmp_path / "s.duckdb"))
    done = researchflow(*args, env=env)
    assert done.returncode == 1
    printed = done.stdout + done.stderr
    assert "Traceback" not in printed and "Encountered exception" not in printed
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "401" in errors[0]
    debug = researchflow("--debug", *args, env=env)
    assert debug.returncode == 1 and "Traceback" in debug.stdout + debug.stderr
