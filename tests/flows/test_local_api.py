"""No orphaned Prefect API: a CLI command's own server dies with it, even on SIGKILL, and an
ephemeral server that an earlier killed run left behind is ended by the next command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.local_api import MARK, reap_orphans

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")


def _children_with(mark: str, parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid"))
        if ppid == parent and mark.encode() in argv:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_a_command_killed_with_sigkill_leaves_no_api_server(tmp_path: Path, corpus: Path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), RESEARCHFLOW_MODEL="offline")
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "researchflow"), "run", "threads or asyncio",
         "--corpus", str(corpus), "--db", str(tmp_path / "s.duckdb")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers: list[int] = []
    try:
        assert _wait(lambda: servers.extend(_children_with(MARK, command.pid)) or servers, 60)
    finally:
        command.kill()
        command.wait()
    assert _wait(lambda: not _alive(servers[0]), 10), "the API server outlived its command"


def test_an_ephemeral_server_left_by_a_killed_run_is_reaped(tmp_path: Path):
    # What Prefect's own ephemeral server looks like once its parent was killed: the marker in
    # its command line, the ephemeral flag in its environment, re-parented away from Python.
    pid_file = tmp_path / "pid"
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "import time; time.sleep(120)" {MARK} '
                    f'& echo $! > {pid_file}'],
                   env={**os.environ, "PREFECT__SERVER_EPHEMERAL": "1"}, check=True)
    orphan = int(pid_file.read_text())
    try:
        # `&` forks first and execs Python after: until then its command line is the shell's.
        assert _wait(lambda: MARK.encode() in _argv(orphan), 10)
        assert orphan in reap_orphans()
        assert _wait(lambda: not _alive(orphan), 10)
    finally:
        if _alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def test_a_server_whose_parent_is_alive_is_left_alone(tmp_path: Path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", MARK],
                             env={**os.environ, "PREFECT__SERVER_EPHEMERAL": "1"})
    try:
        assert child.pid not in reap_orphans()
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
