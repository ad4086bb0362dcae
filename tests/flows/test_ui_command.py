"""`researchflow ui` (what `make ui` runs) starts the Prefect server with our server settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from flows.local_api import SERVER_SETTINGS
from tests.fakes.prefect_server import free_port

BIN = Path(sys.executable).parent


def _settings(port: int, env: dict[str, str]) -> dict:
    server = subprocess.Popen([str(BIN / "researchflow"), "ui", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/admin/settings", timeout=2) as answer:
                    return json.load(answer)
            except OSError:
                assert server.poll() is None, "the server exited"
                assert time.monotonic() < deadline, "the server did not start in 120 s"
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_ui_runs_the_server_with_batched_event_writes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_SERVER_SERVICES")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    services = _settings(free_port(), env)["server"]["services"]
    assert services["task_run_recorder"]["batch_size"] == int(
        SERVER_SETTINGS["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE"]) > 1
    assert services["event_persister"]["batch_size"] == int(
        SERVER_SETTINGS["PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE"]) > 20

    # A setting the user made wins over ours.
    env["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE"] = "7"
    recorder = _settings(free_port(), env)["server"]["services"]["task_run_recorder"]
    assert recorder["batch_size"] == 7
