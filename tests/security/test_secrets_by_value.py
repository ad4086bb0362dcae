"""A key the provider echoes back is masked by its value, wherever text leaves or is stored.

The key here has no well-known prefix (a proxy's or a self-hosted server's key), and the
provider echoes it quoted, which no pattern for "looks like a key" catches. Masking by value must:
the real openai SDK against a loopback provider, then a real flow run whose DuckDB rows, Prefect
logs (read back from the API), artifacts, state messages and result files are searched for it,
then the CLI's own output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.models import TopicOptions
from tasks import contexts
from core.topics.failures import describe
from core.llm.registry import make_model
from core.models import Message
from core.signals import Fatal, mask_secrets
from core.settings import Settings
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer

KEY = "rfproxy-7Q2mZt9LkX4vB8nRw3"  # no known prefix: only its value can give it away


def echoing_401() -> Reply:
    return Reply(401, fake.error_body("openai", 401, f"Incorrect API key provided: '{KEY}'. "
                                      "You can find your API key at https://example.invalid.",
                                      code="invalid_api_key"))


@pytest.fixture()
def provider(monkeypatch):
    with ScriptedServer(default=echoing_401()) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        yield srv


@pytest.fixture(autouse=True)
def fresh_contexts():
    contexts.close()
    yield
    contexts.close()


def test_a_loaded_key_is_masked_by_value_whatever_surrounds_it(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("RESEARCHFLOW_SERPAPI_API_KEY", "serp0000aaaa1111bbbb")
    Settings.load()
    for text in (f"key '{KEY}' refused", f'{{"key": "{KEY}"}}', f"...{KEY}...",
                 "https://serpapi.example/search?api_key=serp0000aaaa1111bbbb&q=x"):
        masked = mask_secrets(text)
        assert KEY not in masked and "serp0000aaaa1111bbbb" not in masked, masked


def test_the_real_sdk_echoing_the_key_gives_a_signal_without_it(provider):
    model = make_model("openai:gpt-4o-mini", Settings.load(request_timeout=10))
    with pytest.raises(Fatal) as caught:
        model.complete([Message(role="user", content="hi")], max_tokens=10)
    assert caught.value.reason == "auth"
    sent = {k.lower(): v for k, v in provider.requests[0].headers.items()}
    assert sent["authorization"] == f"Bearer {KEY}"  # it was sent
    for text in (str(caught.value), caught.value.message, describe("plan", caught.value)):
        assert KEY not in text, text
        assert "Incorrect API key provided" in text  # the cause is still there to read


def test_log_records_are_masked_however_they_are_made(provider):
    Settings.load()
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(logging.Formatter().format(record))

    keep = Keep()
    loggers = [logging.getLogger(n) for n in ("prefect.task_runs", "researchflow.x", "httpx")]
    for lg in loggers:
        lg.addHandler(keep)
    try:
        model = make_model("openai:gpt-4o-mini", Settings.load(request_timeout=10))
        try:
            model.complete([Message(role="user", content="hi")], max_tokens=10)
        except Fatal:
            # Prefect logs a failed task with its traceback: the SDK's own exception, with the
            # key in its text, is the signal's __cause__.
            loggers[0].exception("Task run failed with exception %r", KEY)
        loggers[1].warning("plain %s", KEY)
        loggers[2].error(f"f-string {KEY}")
    finally:
        for lg in loggers:
            lg.removeHandler(keep)
    assert len(records) == 3
    assert "AuthenticationError" in records[0]  # the traceback is kept, masked
    assert not [r for r in records if KEY in r], records


# -- through a flow run: DuckDB, Prefect's API, result files ----------------------------------

def _logs(flow_run_id) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)  # logs are shipped in batches

    async def read():
        async with get_client() as client:
            return await client.read_logs(log_filter=LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))

    return [log.message for log in asyncio.run(read())]


def _run_states(flow_run_id) -> list[str]:
    # Read once settled: a state still in flight as an event would pass without being looked at.
    from tests.flows.prefect_api import _ask, task_runs

    tasks = task_runs(flow_run_id)
    flow_run = _ask(lambda client: client.read_flow_run(flow_run_id))
    return [flow_run.state.message or ""] + [t.state.message or "" for t in tasks if t.state]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness", "api_logs")
def test_a_flow_run_stores_and_ships_no_echoed_key(provider, tmp_path, session_dir):
    from core.store import query_readonly
    from flows.topic import research_topic
    from tests.flows.prefect_api import artifacts

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Threads\n\nThreads share memory inside a process.\n")
    db = tmp_path / "store.duckdb"
    state = research_topic(topic="How do threads share memory? (echoed key)", batch_id="keys",
                           model="openai:gpt-4o-mini",
                           search="corpus", corpus_dir=str(corpus), db_path=str(db),
                           return_state=True,
                           options=TopicOptions(max_subquestions=1, max_rounds=1))
    assert state.is_failed()
    run_id = state.state_details.flow_run_id
    contexts.flush()

    errors = [e for (e,) in query_readonly(db, "SELECT error FROM topics")[1]]
    calls = [e for (e,) in query_readonly(db, "SELECT error FROM ledger")[1]]
    assert errors and "Incorrect API key provided" in errors[0]
    assert calls and all(KEY not in (e or "") for e in errors + calls), (errors, calls)
    assert KEY.encode() not in db.read_bytes()

    logs = _logs(run_id)
    assert any("Incorrect API key provided" in m for m in logs), logs
    assert not [m for m in logs if KEY in m]
    shown = [json.dumps(a.data, default=str) + (a.description or "") for a in artifacts(run_id)]
    assert any("Incorrect API key provided" in s for s in shown), shown
    assert not [s for s in shown if KEY in s]
    assert not [m for m in _run_states(run_id) if KEY in m]
    for path in (session_dir / "prefect-results").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_the_cli_prints_no_echoed_key(provider, tmp_path):
    from prefect.settings import PREFECT_API_URL

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Threads\n\nThreads share memory inside a process.\n")
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "researchflow"), "run", "How do threads work? (cli)",
         "--corpus", str(corpus), "--db", str(tmp_path / "s.duckdb"), "--max-subquestions", "1",
         "--model", "openai:gpt-4o-mini"],
        env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert "Incorrect API key provided" in shown
    assert KEY not in shown, shown


def test_a_key_echoed_in_base64_is_masked_too() -> None:
    """Issue 35 (10): masking by value missed a key echoed base64-encoded, alone or inside a
    Basic credential (user:key), standard or URL-safe."""
    import base64

    from core import secrets

    secrets.remember(KEY)
    for text in (base64.b64encode(KEY.encode()).decode(),
                 "Basic " + base64.b64encode(f"user:{KEY}".encode()).decode(),
                 base64.b64encode(f"ab:{KEY}".encode()).decode(),
                 base64.urlsafe_b64encode(f"x{KEY}?".encode()).decode()):
        shown = secrets.mask(text)
        assert "***" in shown, text
        assert base64.b64encode(KEY.encode()).decode()[4:-4] not in shown
