"""A Prefect API for one CLI command when none is configured, that cannot outlive the command.

Without `PREFECT_API_URL`, Prefect starts an ephemeral API server (a uvicorn child) and stops it
at exit; a command killed with SIGKILL never reaches that exit, and the server is orphaned
(~200 MB each time). So the CLI starts the same server itself, asking the kernel to end it when
the command dies (`PR_SET_PDEATHSIG`, Linux).

Should one outlive its command anyway, the next command ends it, and only it: every server
started here gets a random token in its environment, and a record under the cache folder
(`<cache>/local-api/<pid>.json`: the server's pid and token, the command's pid and start time).
A server is ended when its record's command is gone and the process at that pid still carries
that token (a reused pid does not). Nothing is judged from command lines: a Prefect server that
another program started is never touched.

The server runs as Prefect's own ephemeral one does, through public settings: no UI, and only
the background services an ephemeral server runs (the scheduler, late-runs, foreman,
cancellation-cleanup, pause-expiry, repossessor and cleanup-reconciler services off).

With `PREFECT_API_URL` set (a running `prefect server start`, the way to keep history and use
the UI), nothing is started here.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MARK = "prefect.server.api.server:create_app"  # Prefect's app factory, which uvicorn serves
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
# What Prefect's private PREFECT__SERVER_EPHEMERAL switch does, said with public settings: the
# UI off, and every background service off that an ephemeral server does not run (measured on
# Prefect 3.9.1: the same perpetual services end up enabled).
LOCAL_SERVER_SETTINGS = {
    "PREFECT_UI_ENABLED": "0",
    **{f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"
       for name in ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP",
                    "PAUSE_EXPIRATIONS", "REPOSSESSOR", "CLEANUP_RECONCILER")},
}
TOKEN_VARIABLE = "RESEARCHFLOW_LOCAL_API_TOKEN"
_PR_SET_PDEATHSIG = 1


class LocalApiError(RuntimeError):
    """The command's own Prefect API did not start (its output file is named)."""


def ensure_api(timeout: float = 120.0) -> str | None:
    """The API URL this process will use: the configured one, else a fresh local server's."""
    from prefect.settings import PREFECT_API_URL

    if os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value():
        return None
    reap_orphans()
    port = _free_port()
    # The server's own output (its services' shutdown tracebacks among it) goes to a file, not
    # the user's terminal; it is named when the server does not start.
    log = records_dir() / f"server-{port}.log"
    process = spawn_owned(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(_prefect_root()), "--factory", MARK,
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"],
        {**_without_keys(server_env()), **LOCAL_SERVER_SETTINGS}, log=log)
    # Registered before Prefect's own log and event workers start, so those drain first.
    stop = functools.partial(_stop, process, forget_log=True)
    atexit.register(stop)
    url = f"http://127.0.0.1:{port}/api"
    try:
        _wait_healthy(url, process, timeout)
    except LocalApiError:
        atexit.unregister(stop)  # keep the log: the error tells the user to read it
        _stop(process)
        raise
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


def _without_keys(env: dict[str, str]) -> dict[str, str]:
    """A server of runs needs no provider's key: none is handed to it."""
    return {name: value for name, value in env.items()
            if not (name.endswith(("_API_KEY", "_KEY")) or name in ("PGPASSWORD",))}


def records_dir() -> Path:
    """Where the servers started here are recorded: `<cache>/local-api`."""
    from core.settings import Settings, default_cache_dir

    try:
        cache = Settings.load().cache_dir
    except ValueError:  # settings the command itself will report; the records still have a home
        cache = default_cache_dir()
    return Path(cache).expanduser() / "local-api"


def spawn_owned(args: list[str], env: dict[str, str], *, records: Path | None = None,
                die_with_parent: bool = True, log: Path | None = None) -> subprocess.Popen:
    """Start a process that this command owns: a fresh token in its environment, a record of
    it under `records` (default: records_dir()), and (Linux) the kernel ends it with us. With
    `log`, its output goes to that file instead of our terminal."""
    token = secrets.token_hex(16)
    preexec = _die_with_parent if die_with_parent and sys.platform.startswith("linux") else None
    out = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "ab")  # noqa: SIM115 - the child holds it; ours closes below
    try:
        process = subprocess.Popen(args, env={**env, TOKEN_VARIABLE: token}, preexec_fn=preexec,
                                   stdout=out, stderr=subprocess.STDOUT if out else None)
    finally:
        if out is not None:
            out.close()
    process.log = log  # type: ignore[attr-defined]
    record = records_dir() if records is None else records
    try:
        record.mkdir(parents=True, exist_ok=True)
        spare = record / f".{process.pid}.tmp"
        spare.write_text(json.dumps({"pid": process.pid, "token": token, "owner": os.getpid(),
                                     "owner_started": _started(os.getpid())}))
        spare.chmod(0o600)
        spare.replace(record / f"{process.pid}.json")
    except OSError:
        pass  # unrecorded, it is still ended with us; only a later reap cannot find it
    process.record = record / f"{process.pid}.json"  # type: ignore[attr-defined]
    return process


def reap_orphans(records: Path | None = None) -> list[int]:
    """End the servers started here whose command has gone; returns their pids (Linux).

    A record whose command still runs is left alone; one whose process is gone, or is now a
    process without our token (a reused pid), is only deleted.
    """
    folder = records_dir() if records is None else records
    reaped = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            record = json.loads(path.read_text())
            pid, token = int(record["pid"]), str(record["token"])
            owner, owner_started = int(record["owner"]), record.get("owner_started")
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if owner_started is not None and _started(owner) == owner_started:
            continue  # its command is still running (this one, maybe)
        if _carries(pid, token):
            try:
                os.kill(pid, signal.SIGTERM)
                reaped.append(pid)
            except OSError:
                pass
        path.unlink(missing_ok=True)
    return reaped


def _carries(pid: int, token: str) -> bool:
    """Whether process `pid` is of this user and was started with our token."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{TOKEN_VARIABLE}={token}".encode() in environ


def _started(pid: int) -> int | None:
    """A process's start time (clock ticks since boot), which a reused pid does not share."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name may hold spaces
    except (OSError, IndexError, ValueError):
        return None


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel sends SIGTERM when the parent dies.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_healthy(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalApiError(f"the local Prefect API exited with code {process.returncode}"
                               + _log_hint(process))
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    _stop(process)
    raise LocalApiError(f"the local Prefect API did not answer within {timeout:.0f} s"
                       + _log_hint(process))


def _log_hint(process: subprocess.Popen) -> str:
    log = getattr(process, "log", None)
    return f" (its output: {log})" if log is not None else ""


def _stop(process: subprocess.Popen, *, forget_log: bool = False) -> None:
    """End `process` and its record; `forget_log`: its log too (a server that served its run
    has nothing to tell)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    record = getattr(process, "record", None)
    if record is not None:
        record.unlink(missing_ok=True)
    log = getattr(process, "log", None)
    if forget_log and log is not None:
        log.unlink(missing_ok=True)


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
