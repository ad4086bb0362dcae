"""A real `prefect server start` for tests and benches, on a free loopback port with its own
home (and its own database: SQLite there, or a PostgreSQL URL), stopped however the `with` block
ends; and the one server a whole test run shares (`SharedServer`)."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from flows.local_api import server_env

STARTUP_SECONDS = 300  # migrating a new database costs ~30 s of CPU: minutes on a busy machine

# The run's shared server keeps the services a test reads through: the task-run recorder (task
# states), the scheduler (a served deployment's next date) and the API. The others read every
# event the flows send or poll the database, for what no test looks at (automations, late or
# paused runs, offline workers, expired leases, the events table): on 21 flow tests they were
# ~40% of the server's CPU.
QUIET_SERVICES = ("TRIGGERS", "EVENT_PERSISTER", "FOREMAN", "LATE_RUNS", "PAUSE_EXPIRATIONS",
                  "CANCELLATION_CLEANUP", "REPOSSESSOR", "CLEANUP_RECONCILER")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrefectServer:
    """`prefect server start` on a free loopback port, with its own home; yields the API URL."""

    def __init__(self, home: Path, *, database_url: str | None = None,
                 quiet: bool = False) -> None:
        self.home = home
        self.database_url = database_url  # None: SQLite under home
        self.quiet = quiet  # the QUIET_SERVICES off
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> str:
        self.home.mkdir(parents=True, exist_ok=True)
        env = server_env({**os.environ, "PREFECT_HOME": str(self.home)})  # as we ship it
        env.pop("PREFECT_API_URL", None)
        if self.database_url:
            env["PREFECT_API_DATABASE_CONNECTION_URL"] = self.database_url
        if self.quiet:
            env.update({f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"
                        for name in QUIET_SERVICES})
        # The UI asks its settings, not --port, where the API is (else :4200, not this one).
        env["PREFECT_UI_API_URL"] = f"http://127.0.0.1:{self.port}/api"
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "prefect"), "server", "start", "--host",
             "127.0.0.1", "--port", str(self.port)], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        url = f"http://127.0.0.1:{self.port}/api"
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2):
                    return url
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"the Prefect server on port {self.port} did not start in "
                           f"{STARTUP_SECONDS} s (exit code {self.process.returncode})")

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class SharedServer:
    """One `prefect server start` for every process of a test run (the xdist workers), in
    `folder`: the first process to ask starts it, the others wait for it (a file lock) and
    use it. It outlives the process that started it; `stop()` ends it, from the process that
    owns the run. A copy of its database, taken as it starts, is `template`: a new server
    seeded with it skips the migrations (half of its start-up)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.template = folder / "template.db"
        self._started: PrefectServer | None = None

    def url(self) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its process dies
            known = self.folder / "url"
            if known.exists():
                return known.read_text(encoding="utf-8")
            server = PrefectServer(self.folder / "home", quiet=True)
            url = server.__enter__()
            self._started = server
            _snapshot(server.home / "prefect.db", self.template)
            (self.folder / "pid").write_text(str(server.process.pid), encoding="utf-8")
            known.write_text(url, encoding="utf-8")
            return url

    def stop(self) -> None:
        if self._started is not None:  # started by this process: reap it too
            self._started.__exit__()
        else:
            try:
                pid = int((self.folder / "pid").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return
            _end_group(pid)
        for name in ("url", "pid"):
            (self.folder / name).unlink(missing_ok=True)

    def seed(self, home: Path) -> None:
        """Give a new Prefect home (`PREFECT_HOME`) the migrated database, if there is one."""
        if self.template.exists():
            home.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.template, home / "prefect.db")


def _snapshot(db: Path, to: Path) -> None:
    """A consistent copy of a live SQLite database (the backup API), put in place whole."""
    part = to.with_suffix(f".{os.getpid()}.part")
    with sqlite3.connect(db) as source, sqlite3.connect(part) as copy:
        source.backup(copy)
    part.replace(to)


def _end_group(pid: int) -> None:
    """End a server started in its own session (its process group is its pid), not our child."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _gone(pid):
                return
            time.sleep(0.2)


def _gone(pid: int) -> bool:
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()  # a zombie has ended
    except OSError:
        return True
