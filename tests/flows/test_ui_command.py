"""`researchflow ui` (what `make ui` runs) starts the Prefect server with our server settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from flows.local_api import SERVER_SETTINGS
from tests.fakes.prefect_server import STARTUP_SECONDS, free_port

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow  # a Prefect server's start-up


def _settings(port: int, env: dict[str, str]) -> dict:
    server = subprocess.Popen([str(BIN / "researchflow"), "ui", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                with urllib.request.urlopen(f"{url}/admin/settings", timeout=2) as answer:
                    settings = json.load(answer)
                # What the UI in a browser is told to call (Prefect's /ui-settings).
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui-settings",
                                            timeout=10) as answer:
                    return {**settings, "ui_settings": json.load(answer)}
            except OSError:
                assert server.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not start in time"
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_ui_runs_the_server_with_batched_event_writes(tmp_path: Path, shared_prefect) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_SERVER_SERVICES")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    shared_prefect.seed(tmp_path / "home")  # a migrated database, if the run made one: ~15 s less
    env.pop("PREFECT_API_URL", None)
    # One server shows both: a setting the user made wins over ours, and ours apply elsewhere.
    env["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE"] = "7"
    port = free_port()
    settings = _settings(port, env)
    # The browser's UI calls this server's API, not port 4200's.
    assert settings["ui_settings"]["api_url"] == f"http://127.0.0.1:{port}/api"
    services = settings["server"]["services"]
    recorder, persister = services["task_run_recorder"], services["event_persister"]
    assert recorder["batch_size"] == 7
    # Ours, each unlike Prefect's default (recorder: 1 per write, every 5 s; persister: 20, 5 s).
    assert recorder["flush_interval"] == float(
        SERVER_SETTINGS["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL"]) < 5
    assert persister["batch_size"] == int(
        SERVER_SETTINGS["PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE"]) > 20
    assert persister["flush_interval"] == float(
        SERVER_SETTINGS["PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL"]) < 5
    assert int(SERVER_SETTINGS["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE"]) > 1


def test_every_server_we_start_runs_with_our_server_settings(prefect_server: str) -> None:
    # The session's server is started from flows.local_api.server_env, as `researchflow ui`
    # and a CLI command's own server are: every one of SERVER_SETTINGS reaches it.
    with urllib.request.urlopen(f"{prefect_server}/admin/settings", timeout=30) as answer:
        services = json.load(answer)["server"]["services"]
    shown = {}
    for service in ("task_run_recorder", "event_persister"):
        for field in ("batch_size", "flush_interval"):
            shown[f"PREFECT_SERVER_SERVICES_{service}_{field}".upper()] = services[service][field]
    ours = {k: float(v) for k, v in SERVER_SETTINGS.items() if k.startswith("PREFECT_SERVER_SERV")}
    assert ours and {k: shown[k] for k in ours} == ours
