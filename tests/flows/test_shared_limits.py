"""Past one machine on Prefect's own mechanisms, against the session's real `prefect server start`.

- Provider limits shared by every process (tasks/shared_pacing.py): two processes together stay
  at the cap (each with its own gate, they would make twice as many calls), and a rate limit one
  process saw pauses the other; the limit is named for the provider and listed on the server, and
  one a user set in the UI is kept.
- Keys from Secret blocks (tasks/secret_blocks.py): the environment wins, a block stands in for
  it, a missing one is named; and a deployment run by a `researchflow serve` whose environment
  has no key succeeds with the block's key, which is found in no log, result, artifact or store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.fakes.research_provider import SDK_ENV, TEST_MODELS, ResearchProvider, write_batch

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def provider() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"  # its own limits and pause on the shared server


def _passes(api: str, kind: str, provider: str, per_minute: int, calls: int,
            out: Path, *, processes: int = 2) -> list[float]:
    """Wall-clock seconds at which `processes` processes were each let through `calls` times."""
    env = {**os.environ, "PREFECT_API_URL": api}
    started = [subprocess.Popen([sys.executable, "-m", "tests.fakes.gate_worker", kind, provider,
                                 str(per_minute), str(calls), str(out / f"{kind}-{n}.json")],
                                cwd=ROOT, env=env) for n in range(processes)]
    for process in started:
        assert process.wait(timeout=180) == 0
    return sorted(t for n in range(processes)
                  for t in json.loads((out / f"{kind}-{n}.json").read_text()))


def test_two_processes_together_stay_at_the_cap(prefect_server, provider, tmp_path) -> None:
    cap = 120  # a call every 0.5 s
    own = _passes(prefect_server, "process", provider, cap, 6, tmp_path)
    shared = _passes(prefect_server, "shared", provider, cap, 6, tmp_path)

    # Each process's own gate lets its 6 through at once: 12 within a second, "120 a minute"
    # twice over if the calls went on.
    assert own[-1] - own[0] < 5
    # The server's limit spaces all 12 at least 60/120 s apart (less a little of the server's
    # clock): together they never go faster than the cap.
    assert shared[-1] - shared[0] >= 11 * 0.5 * 0.95, shared


def test_a_rate_limit_one_process_saw_pauses_the_other(prefect_harness, prefect_server,
                                                       provider, tmp_path) -> None:
    from tasks.shared_pacing import SharedGate

    told = time.time()
    assert SharedGate(provider).rate_limited(3.0) == 3.0

    other = _passes(prefect_server, "shared", provider, 0, 1, tmp_path, processes=1)

    assert other[0] >= told + 3.0 - 0.05  # not one call before the retry-after ran out


def test_the_limit_is_named_for_the_provider_and_one_set_in_the_ui_is_kept(
        prefect_harness, provider, caplog) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    from tasks.shared_pacing import SharedGate

    SharedGate(provider, 90, 6000).wait(100)
    kept = f"other-{provider}"
    with get_client(sync_client=True) as client:
        calls = client.read_global_concurrency_limit_by_name(f"researchflow-{provider}-calls")
        tokens = client.read_global_concurrency_limit_by_name(f"researchflow-{provider}-tokens")
        client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(
            name=f"researchflow-{kept}-calls", limit=5, slot_decay_per_second=0.5))
    assert (calls.limit, calls.slot_decay_per_second) == (1, 1.5)  # 90 a minute
    assert (tokens.limit, tokens.slot_decay_per_second) == (6000, 100.0)

    with caplog.at_level("WARNING", logger="researchflow.pacing"):
        SharedGate(kept, 600).wait()  # a worker's own setting does not overwrite the UI's
    with get_client(sync_client=True) as client:
        ui = client.read_global_concurrency_limit_by_name(f"researchflow-{kept}-calls")
    assert (ui.limit, ui.slot_decay_per_second) == (5, 0.5)
    assert f"researchflow-{kept}-calls is not this worker's 600 a minute" in caplog.text


def test_researchflow_limits_sets_the_limits_every_worker_shares(prefect_server,
                                                                  provider) -> None:
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    command = [str(BIN / "researchflow"), "limits", provider, "--calls-per-minute", "30"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    again = subprocess.run(command[:-1] + ["45"], env=env, capture_output=True, text=True,
                           timeout=120)

    assert first.returncode == 0, first.stderr
    assert f"researchflow-{provider}-calls: 30 calls a minute (created)" in first.stdout
    assert f"researchflow-{provider}-calls: 45 calls a minute (updated)" in again.stdout
    assert "0.75 freed a second (~45 a minute)" in again.stdout
    assert f"researchflow-{provider}-tokens: none" in again.stdout


# --- keys from Secret blocks ---------------------------------------------------------------------

def _secret(name: str, value: str) -> None:
    from prefect.blocks.system import Secret

    Secret(value=value).save(name, overwrite=True)


def test_a_secret_block_stands_in_for_a_key_the_environment_lacks(prefect_harness,
                                                                  monkeypatch) -> None:
    from core import secrets
    from core.llm.registry import make_model
    from core.settings import RunConfig
    from core.signals import Fatal
    from tasks.secret_blocks import SecretBlockKeys

    config = RunConfig(cache_dir="/tmp", db_path="/tmp/x.duckdb")
    block = f"sk-block-{uuid.uuid4().hex}"
    _secret("researchflow-anthropic-api-key", block)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(Path(__file__).parent)  # no .env here

    model = make_model("anthropic:claude-sonnet-4-5", config, keys=SecretBlockKeys())
    assert model.api_key.get_secret_value() == block
    assert secrets.mask(f"said {block}") == "said sk-***"  # masked by value at once

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-the-environment")
    model = make_model("anthropic:claude-sonnet-4-5", config, keys=SecretBlockKeys())
    assert model.api_key.get_secret_value() == "sk-from-the-environment"  # the environment wins

    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(Fatal) as missing:
        make_model("gemini:gemini-2.5-flash", config, keys=SecretBlockKeys())
    line = str(missing.value)
    assert "Prefect Secret block researchflow-gemini-api-key" in line and "\n" not in line


def test_the_lakes_password_comes_from_a_block_where_pgpassword_is_unset(prefect_harness,
                                                                           monkeypatch) -> None:
    from core import secrets
    from tasks.secret_blocks import lake_password

    password = f"lake-{uuid.uuid4().hex}"
    _secret("researchflow-lake-password", password)
    lake = "ducklake:postgres:dbname=rf host=127.0.0.1 user=rf"
    monkeypatch.setenv("PGPASSWORD", "set-by-the-user")
    lake_password(lake)
    assert os.environ["PGPASSWORD"] == "set-by-the-user"  # the environment wins

    monkeypatch.delenv("PGPASSWORD")
    lake_password("/tmp/a-file.duckdb")
    assert "PGPASSWORD" not in os.environ  # a file store needs none
    lake_password(lake)
    assert os.environ["PGPASSWORD"] == password  # where libpq reads it, in this process
    assert password not in secrets.mask(f"connecting with {password}")


class KeyCheckingProvider:
    """The loopback research provider, answering only a request that carries `key`."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.inner = ResearchProvider("openai")
        self.refused = 0
        self.answered = 0

    def __call__(self, rec: Recorded) -> Reply:
        if rec.headers.get("authorization") != f"Bearer {self.key}":
            self.refused += 1
            return Reply(401, fake.error_body("openai", 401, "Incorrect API key provided"))
        self.answered += 1
        return self.inner(rec)


@pytest.mark.xdist_group("deployments")  # serves the deployment names the others serve
def test_a_deployment_on_a_worker_without_a_key_uses_the_secret_block(
        prefect_harness, prefect_server, tmp_path) -> None:
    from core.store import query_readonly
    from tests.flows.test_deployment_server import Api, Background, _env, _fresh_serve

    key = f"sk-proj-{uuid.uuid4().hex}{uuid.uuid4().hex}"
    _secret("researchflow-openai-api-key", key)
    corpus, csv, db = write_batch(tmp_path / "work", ("memory use",),
                                  ("Threading or asyncio for memory use",), sentences=30)
    rest = Api(prefect_server)
    scenario = type("S", (), {"csv": csv, "db": db})
    llm_provider = KeyCheckingProvider(key)
    _, url_var, suffix = SDK_ENV["openai"]
    with ScriptedServer(default=llm_provider) as llm:
        env = _env(prefect_server, tmp_path, **{url_var: llm.url + suffix,
                                                "PREFECT_LOGGING_TO_API_ENABLED": "true"})
        for name in ("OPENAI_API_KEY", "RESEARCHFLOW_OPENAI_API_KEY"):
            env.pop(name, None)
        cwd = tmp_path / "serve-cwd"
        cwd.mkdir()
        with Background(_fresh_serve(rest, scenario), cwd=cwd, env=env,
                        log=tmp_path / "serve.log") as served:
            adhoc = rest.deployment("research-topic", "adhoc-served")
            run = rest.run(adhoc, {"topic": "Threading or asyncio for memory use",
                                   "model": TEST_MODELS["openai"], "search": "corpus",
                                   "corpus_dir": str(corpus), "db_path": str(db),
                                   "options": {"max_waves": 1}})
            state = rest.final_state(run)
            assert state == "COMPLETED", served.tail() + rest.last_message
    assert llm_provider.answered > 0 and llm_provider.refused == 0
    _, rows = query_readonly(db, "SELECT count(*) FROM reports")
    assert rows == [(1,)]

    # Nowhere: the serving process's output, the run's logs and artifacts on the server, its
    # parameters, the results Prefect persisted, the store's files.
    http = httpx.Client(base_url=prefect_server.rstrip("/") + "/", timeout=30)
    logs = http.post("logs/filter", json={"logs": {"flow_run_id": {"any_": [run]}},
                                          "limit": 200}).json()
    artifacts = http.post("artifacts/filter", json={"limit": 200}).json()
    flow_run = http.get(f"flow_runs/{run}").json()
    assert logs, "the run shipped no log lines to look in"
    places = {"serve output": (tmp_path / "serve.log").read_bytes(),
              "run logs": json.dumps(logs).encode(), "artifacts": json.dumps(artifacts).encode(),
              "flow run": json.dumps(flow_run).encode()}
    for folder in (tmp_path / "prefect-results", db.parent):
        for path in folder.rglob("*"):
            if path.is_file():
                places[str(path)] = path.read_bytes()
    assert len(places) > 5
    found = [where for where, data in places.items() if key.encode() in data]
    assert found == []


def test_a_context_built_under_a_server_shares_its_gates_unless_told_not_to(
        prefect_harness, tmp_path) -> None:
    from core.accounting.pacing import ProviderGate
    from core.settings import Settings, run_config
    from tasks import contexts
    from tasks.shared_pacing import SharedGate

    def gate(**changes):
        settings = Settings(_env_file=None, model="offline", search="searxng",
                            searxng_url="http://127.0.0.1:9", max_calls_per_minute=7,
                            cache_dir=os.environ["RESEARCHFLOW_CACHE_DIR"],
                            db_path=tmp_path / "s.duckdb", **changes)
        return contexts.context_for(run_config(settings)).gates["searxng"]

    contexts.close()
    try:
        shared = gate(shared_limits=True)
        assert isinstance(shared, SharedGate) and shared.calls_per_minute == 7
        assert isinstance(gate(shared_limits=False), ProviderGate)
        contexts.close()
        contexts.alone()  # the CLI on its own API, tasks in its threads
        assert isinstance(gate(shared_limits=True), ProviderGate)
    finally:
        contexts.close()
        contexts._CONTEXTS._alone = False


class RateLimitingFirst:
    """The loopback research provider, answering its first call with a 429 (retry-after 2 s)."""

    def __init__(self) -> None:
        self.inner = ResearchProvider("openai")
        self.times: list[float] = []

    def __call__(self, rec: Recorded) -> Reply:
        self.times.append(time.time())
        if len(self.times) == 1:
            return fake.rate_limit_error("openai", retry_after=2)
        return self.inner(rec)


def test_a_topic_flow_on_a_server_paces_through_its_limits(prefect_harness, tmp_path,
                                                            monkeypatch) -> None:
    from prefect.client.orchestration import get_client

    from core.models import TopicOptions
    from flows.topic import research_topic
    from tasks import contexts
    from tests.fakes.research_provider import write_pages

    pages = write_pages(tmp_path / "pages", ("Memory", "Blocking"))
    provider_fake = RateLimitingFirst()
    key_var, url_var, suffix = SDK_ENV["openai"]
    contexts.close()
    with ScriptedServer(default=provider_fake) as llm:
        monkeypatch.setenv(key_var, "sk-shared-limits-not-a-key")
        monkeypatch.setenv(url_var, llm.url + suffix)
        monkeypatch.setenv("RESEARCHFLOW_MAX_OUTPUT_TOKENS", "300")
        monkeypatch.setenv("RESEARCHFLOW_SHARED_LIMITS", "true")
        monkeypatch.setenv("RESEARCHFLOW_MAX_CALLS_PER_MINUTE", "600")
        try:
            state = research_topic(topic="Threading or asyncio, paced by the server",
                                   batch_id="shared", options=TopicOptions(max_subquestions=2,
                                                                           max_rounds=1),
                                   model=TEST_MODELS["openai"], search="corpus",
                                   corpus_dir=str(pages), db_path=str(tmp_path / "s.duckdb"),
                                   return_state=True)
        finally:
            contexts.close()
    assert state.is_completed(), state.message
    told, *after = provider_fake.times
    assert after and after[0] >= told + 2.0 - 0.05  # the retry waited out the retry-after
    gaps = [b - a for a, b in zip(after, after[1:])]
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name("researchflow-openai-calls")
        paused = client.read_variable_by_name("researchflow-openai-paused-until")
    assert (limit.limit, limit.slot_decay_per_second) == (1, 10.0)  # made by the run's worker
    assert paused is not None and float(paused.value) >= told + 2.0 - 0.5
    # 600 a minute: a call every 0.1 s, as the slots are handed out. The provider sees them
    # later by a loopback hop whose delay varies on a loaded machine, so one gap may look short;
    # over the run the calls cannot come faster than the slots decay.
    assert min(gaps) >= 0.02 and after[-1] - after[0] >= 0.09 * len(gaps), gaps
