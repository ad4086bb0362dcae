"""A Prefect API for one CLI command when none is configured, that cannot outlive the command.

Without `PREFECT_API_URL`, Prefect starts an ephemeral API server (a uvicorn child) and stops it
at exit; a command killed with SIGKILL never reaches that exit, and the server is orphaned
(~200 MB each time). So the CLI starts the same server itself, asking the kernel to end it when
the command dies (`PR_SET_PDEATHSIG`, Linux), and before that ends any ephemeral server that an
earlier killed run left behind: one whose parent is gone (re-parented to an init process).

With `PREFECT_API_URL` set (a running `prefect server start`, the way to keep history and use
the UI), nothing is started here.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MARK = "prefect.server.api.server:create_app"  # in the command line of every ephemeral server
# How every Prefect server we start runs (this command's own, `researchflow ui`, the tests'):
# the task-run recorder and the event persister write in batches instead of a transaction per
# event or per 20. A batch of 10 topics sends ~2,000 task-run events; written one by one they
# kept SQLite write-locked often enough that creating a topic's subflow met "database is locked"
# (a 503, then the client's 2 s back-off) for 10-70 s per batch (bench/overhead.py). The UI shows
# task runs up to 1 s and events up to 2 s later.
SERVER_SETTINGS = {
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "200",
    "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_FLUSH_INTERVAL": "1",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "1000",
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "2",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}
_PR_SET_PDEATHSIG = 1


def ensure_api(timeout: float = 120.0) -> str | None:
    """The API URL this process will use: the configured one, else a fresh local server's."""
    from prefect.settings import PREFECT_API_URL

    if os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value():
        return None
    reap_orphans()
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(_prefect_root()), "--factory", MARK,
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"],
        env={**server_env(), "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
             "PREFECT__SERVER_FINAL": "1"},
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    # Registered before Prefect's own log and event workers start, so those drain first.
    atexit.register(_stop, process)
    url = f"http://127.0.0.1:{port}/api"
    _wait_healthy(url, process, timeout)
    os.environ["PREFECT_API_URL"] = url
    _use(url)
    return url


def server_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Prefect server: base (default: ours) plus SERVER_SETTINGS, except
    where base sets them already (a user's own choice wins)."""
    env = dict(os.environ if base is None else base)
    for name, value in SERVER_SETTINGS.items():
        env.setdefault(name, value)
    return env


def reap_orphans() -> list[int]:
    """End ephemeral Prefect servers of this user whose parent process has gone (Linux)."""
    reaped = []
    for pid in _ephemeral_servers():
        if _orphaned(pid):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue
            reaped.append(pid)
    return reaped


def _ephemeral_servers() -> list[int]:
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if MARK.encode() in argv and b"PREFECT__SERVER_EPHEMERAL=1" in environ:
            found.append(int(entry.name))
    return found


def _orphaned(pid: int) -> bool:
    """A server is started by a Python process; re-parented, its parent is an init process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        ppid = int(next(line.split()[1] for line in status.splitlines()
                        if line.startswith("PPid:")))
        if ppid <= 1:
            return True
        parent = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, StopIteration, ValueError):
        return False
    return b"python" not in Path(parent.decode(errors="replace")).name.encode()


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel sends SIGTERM when the parent dies.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_healthy(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the local Prefect API exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    _stop(process)
    raise RuntimeError(f"the local Prefect API did not answer within {timeout:.0f} s")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _use(url: str) -> None:
    """Point this process's Prefect settings at `url` (they were read when Prefect imported)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    context = temporary_settings(updates={PREFECT_API_URL: url})
    context.__enter__()  # for the life of the command: its end is the process's end
    _HELD.append(context)


_HELD: list = []


def _prefect_root() -> Path:
    import prefect

    return Path(prefect.__file__).parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
