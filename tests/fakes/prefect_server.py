"""A real `prefect server start` for tests and benches, on a free loopback port with its own
home (and its own database: SQLite there, or a PostgreSQL URL), stopped however the `with` block
ends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from flows.local_api import server_env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrefectServer:
    """`prefect server start` on a free loopback port, with its own home; yields the API URL."""

    def __init__(self, home: Path, *, database_url: str | None = None) -> None:
        self.home = home
        self.database_url = database_url  # None: SQLite under home
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        self.home.mkdir(parents=True, exist_ok=True)
        env = server_env({**os.environ, "PREFECT_HOME": str(self.home)})  # as we ship it
        env.pop("PREFECT_API_URL", None)
        if self.database_url:
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = self.database_url
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "prefect"), "server", "start", "--host",
             "127.0.0.1", "--port", str(self.port)], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        url = f"http://127.0.0.1:{self.port}/api"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    return url
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"the Prefect server on port {self.port} did not start in 120 s")

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
