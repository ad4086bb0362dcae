"""The deployments as a user starts them, against a real `prefect server start` on loopback.

The server is the session's (tests/conftest.py `prefect_server`). The work-pool pair is
deployed by `prefect deploy` from deployments/prefect.yaml and run by `prefect worker start`
started elsewhere than the repo root, with no RESEARCHFLOW_HOME. The served pair is started by
`researchflow serve`; its batch fails on a refused report call, and is then retried exactly
as the UI's Retry button does (a forced AwaitingRetry state on the same flow run): the retry
must not repeat a provider call that had succeeded. Every process started here (worker,
serve) is ended, with its process group, whatever the test's outcome.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from core.store import query_readonly
from tasks.caching import core_fingerprint
from tests.fakes.http import ScriptedServer
from tests.fakes.fix_scenario import FixScenario
from tests.fakes.rerun_scenario import RerunScenario
from tests.fakes.research_provider import SDK_ENV

# One worker runs them in turn: each serves deployments of the same names on the shared server.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("deployments")]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@pytest.fixture(scope="module")
def api(prefect_server: str) -> str:
    return prefect_server  # the session's real `prefect server start`


class Background:
    """A command in its own process group, its output in a log file; the group is ended at
    exit (SIGTERM, then SIGKILL: a Prefect worker or runner may hang in its graceful stop)."""

    def __init__(self, args: list[str], *, cwd: Path, env: dict, log: Path) -> None:
        self.args, self.cwd, self.env, self.log = args, cwd, env, log
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "Background":
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(self.args, cwd=self.cwd, env=self.env, stdout=sink,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __exit__(self, *exc) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


class Api:
    """The few REST calls the UI makes, sent as the UI sends them."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/") + "/", timeout=30)

    def _send(self, method: str, path: str, **kwargs) -> httpx.Response:
        for attempt in range(6):
            reply = self.http.request(method, path, **kwargs)
            if reply.status_code != 503:  # SQLite busy under load: the UI and Prefect retry too
                return reply
            time.sleep(0.5 * 2 ** attempt)
        raise AssertionError(f"{method} {path}: the Prefect server stayed busy (503)")

    def deployment(self, flow: str, name: str, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            reply = self._send("GET", f"deployments/name/{flow}/{name}")
            if reply.status_code == 200:
                return reply.json()
            if time.monotonic() > deadline:
                raise AssertionError(f"deployment {flow}/{name} never appeared")
            time.sleep(0.5)

    def forget(self, flow: str, name: str) -> None:
        """Delete a deployment an earlier test served under the same name, so what this test
        reads and runs is the one its own `serve` registers."""
        reply = self._send("GET", f"deployments/name/{flow}/{name}")
        if reply.status_code == 200:
            self._send("DELETE", f"deployments/{reply.json()['id']}").raise_for_status()

    def run(self, deployment: dict, parameters: dict) -> str:
        reply = self._send("POST", f"deployments/{deployment['id']}/create_flow_run",
                           json={"parameters": parameters})
        reply.raise_for_status()
        return reply.json()["id"]

    def retry(self, flow_run_id: str) -> None:
        """What the UI's Retry button sends."""
        reply = self._send("POST", f"flow_runs/{flow_run_id}/set_state", json={
            "state": {"type": "SCHEDULED", "name": "AwaitingRetry"}, "force": True})
        reply.raise_for_status()
        assert reply.json()["status"] == "ACCEPT", reply.text

    def final_state(self, flow_run_id: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self._send("GET", f"flow_runs/{flow_run_id}").json()["state"]
            if state and state["type"] in FINAL:
                self.last_message = state.get("message") or ""
                return state["type"]
            time.sleep(0.5)
        return "TIMED OUT"

    def pause(self, deployment: dict) -> None:
        self._send("PATCH", f"deployments/{deployment['id']}",
                   json={"paused": True}).raise_for_status()


def _fresh_serve(rest: "Api", scenario) -> list[str]:
    """`researchflow serve` of the scenario's batch (a cron that never fires by itself), once
    the deployments an earlier test served under the same names are gone."""
    rest.forget("research-batch", "nightly-served")
    rest.forget("research-topic", "adhoc-served")
    return [str(BIN / "researchflow"), "serve", "--csv", str(scenario.csv),
            "--db", str(scenario.db), "--cron", "0 6 1 1 *", "--timezone", "Europe/Berlin"]



@contextmanager
def _serving(api: str, rest: "Api", scenario, tmp: Path, cwd: Path) -> Iterator["Background"]:
    """`researchflow serve` of the scenario's batch, started from `cwd`, its model the
    scenario's loopback provider."""
    key_var, url_var, suffix = SDK_ENV["openai"]
    cwd.mkdir(exist_ok=True)
    with ScriptedServer(default=scenario.provider) as llm:
        env = _env(api, tmp, **{key_var: "sk-served-not-a-real-key",
                                     url_var: llm.url + suffix})
        with Background(_fresh_serve(rest, scenario), cwd=cwd, env=env,
                        log=tmp / "serve.log") as served:
            yield served

def _env(api: str, tmp: Path, **extra: str) -> dict:
    """The environment a user's shell would have: the API URL and nothing else of ours
    (no RESEARCHFLOW_HOME); short polling so runs start within a second or two."""
    env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp / "prefect-home"),
           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(tmp / "prefect-results"),
           "PREFECT_WORKER_QUERY_SECONDS": "1", "PREFECT_RUNNER_POLL_FREQUENCY": "1", **extra}
    env.pop("RESEARCHFLOW_HOME", None)
    env.pop("RESEARCHFLOW_DB_PATH", None)
    return env


def _prefect(env: dict, *args: str) -> str:
    done = subprocess.run([str(BIN / "prefect"), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_prefect_yaml_deploys_and_a_worker_runs_the_adhoc_topic(api, tmp_path, corpus, db_path):
    env = _env(api, tmp_path)
    rest = Api(api)
    _prefect(env, "work-pool", "create", "researchflow", "--type", "process")
    _prefect(env, "--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
    nightly = rest.deployment("research-batch", "nightly-pool")
    rest.pause(nightly)  # its 06:00 run must never research into the repo's own store
    assert nightly["pull_steps"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
    assert nightly["parameters"] == {"csv_path": str(ROOT / "examples" / "topics.csv"),
                                     "db_path": str(ROOT / "researchflow.duckdb"),
                                     "timezone": "UTC"}
    assert nightly["schedules"][0]["schedule"]["timezone"] == "UTC"

    elsewhere = tmp_path / "worker-cwd"
    elsewhere.mkdir()
    adhoc = rest.deployment("research-topic", "adhoc-pool")
    with Background([str(BIN / "prefect"), "worker", "start", "--pool", "researchflow"],
                    cwd=elsewhere, env=env, log=tmp_path / "worker.log") as worker:
        run = rest.run(adhoc, {"topic": "How do threads share memory?", "model": "offline",
                               "search": "corpus", "corpus_dir": str(corpus),
                               "db_path": str(db_path),
                               "options": {"max_waves": 1}})
        state = rest.final_state(run)
        assert state == "COMPLETED", worker.tail()
    _, rows = query_readonly(db_path, "SELECT topic, engine FROM reports")
    assert rows == [("How do threads share memory?", "offline-extractive")]
    assert not list(elsewhere.iterdir())  # nothing written where the worker started


def test_served_batch_retried_as_the_ui_does_reuses_every_finished_call(api, tmp_path):
    scenario = RerunScenario(tmp_path / "scenario")
    provider = scenario.provider
    rest = Api(api)
    elsewhere = tmp_path / "serve-cwd"
    with _serving(api, rest, scenario, tmp_path, elsewhere) as served:
        batch = rest.deployment("research-batch", "nightly-served")
        assert batch["schedules"][0]["schedule"] == {
            "cron": "0 6 1 1 *", "timezone": "Europe/Berlin", "day_or": True}
        assert batch["parameters"]["db_path"] == str(scenario.db)
        assert batch["work_pool_name"] is None  # served, not a pool's deployment
        code = core_fingerprint.__wrapped__()  # part of every cache key (tasks/caching.py)
        parameters = scenario.parameters()
        del parameters["db_path"]  # the served deployment's own --db
        run = rest.run(batch, parameters)
        assert rest.final_state(run) == "FAILED", served.tail()
        assert provider.refused >= 1
        by_role = dict(provider.inner.by_role)
        repeated, calls = provider.inner.repeated_successes, provider.calls

        provider.refusing = False
        rest.retry(run)
        assert rest.final_state(run) == "COMPLETED", served.tail()

    again = {role: n - by_role.get(role, 0) for role, n in provider.inner.by_role.items()
             if n != by_role.get(role, 0)}
    changed = "" if core_fingerprint.__wrapped__() == code else (
        " (core/ was edited during the test: every cache key changed)")
    assert provider.inner.repeated_successes == repeated, f"the retry repeated: {again}{changed}"
    assert provider.calls - calls <= 2, f"the retry called: {again}"
    _, rows = query_readonly(scenario.db, "SELECT count(*), count(DISTINCT report_id) FROM "
                                          f"reports WHERE batch_id = '{scenario.batch_id}'")
    assert rows == [(2, 2)]
    assert not list(elsewhere.iterdir())  # no researchflow.duckdb where serving started


def test_served_batch_retried_as_the_ui_does_after_the_user_adds_the_page(api, tmp_path):
    """Issue 33: a served batch fails a topic whose page is missing (NoEvidence); the user adds
    the page and presses Retry in the UI: the same flow run reads the new page and completes,
    and what the page did not touch is not asked again."""
    scenario = FixScenario(tmp_path / "scenario")
    provider = scenario.provider
    rest = Api(api)
    with _serving(api, rest, scenario, tmp_path, tmp_path / "serve-cwd") as served:
        batch = rest.deployment("research-batch", "nightly-served")
        parameters = scenario.parameters()
        del parameters["db_path"]  # the served deployment's own --db
        run = rest.run(batch, parameters)
        assert rest.final_state(run) == "FAILED", served.tail()
        assert "no page" in rest.last_message, rest.last_message
        first, repeated = provider.calls, provider.repeated_successes

        scenario.fix()
        rest.retry(run)
        assert rest.final_state(run) == "COMPLETED", served.tail()
    retried = provider.calls - first
    print(f"first run {first} calls; UI retry {retried} calls")  # the closing note's figures
    assert 0 < retried < first
    assert provider.repeated_successes == repeated  # nothing answered before is asked again
    _, rows = query_readonly(scenario.db, "SELECT count(DISTINCT report_id) FROM reports "
                                          f"WHERE batch_id = '{scenario.batch_id}'")
    assert rows == [(2,)]


def test_served_batch_researches_again_on_its_next_scheduled_date(api, tmp_path):
    """Two scheduled runs of the served nightly batch, a day apart: each is the edition of its
    scheduled date in the schedule's zone (23:30 UTC is the next day in Berlin), the second
    stores new reports and pays for nothing that did not change."""
    scenario = RerunScenario(tmp_path / "scenario")
    provider = scenario.provider
    provider.refusing = False
    rest = Api(api)
    with _serving(api, rest, scenario, tmp_path, tmp_path) as served:
        batch = rest.deployment("research-batch", "nightly-served")
        assert batch["parameters"]["timezone"] == "Europe/Berlin"
        parameters = scenario.parameters()
        del parameters["db_path"]
        calls = []
        for slot in ("2026-12-01T23:30:00Z", "2026-12-02T23:30:00Z"):
            reply = rest._send("POST", f"deployments/{batch['id']}/create_flow_run", json={
                "parameters": parameters, "state": {
                    "type": "SCHEDULED", "name": "Scheduled",
                    "state_details": {"scheduled_time": slot}}})
            reply.raise_for_status()
            before = provider.inner.successes
            assert rest.final_state(reply.json()["id"]) == "COMPLETED", (rest.last_message,
                                                                         served.tail())
            calls.append(provider.inner.successes - before)
    _, rows = query_readonly(scenario.db, "SELECT edition, count(*) FROM reports "
                                          "GROUP BY edition ORDER BY edition")
    assert rows == [("2026-12-02", 2), ("2026-12-03", 2)]
    assert calls[0] > 0 and calls[1] == 0, calls  # nothing changed: every answer reused
    _, changed = query_readonly(scenario.db, "SELECT count(*), sum(changes) FROM report_changes")
    assert changed == [(2, 0)]
