"""A researchflow command ends only the Prefect servers it started itself.

Before, any process whose command line named Prefect's app factory, whose environment had
Prefect's private ephemeral flag and whose parent's argv[0] lacked "python" was sent SIGTERM:
a live server of someone else's program (started by a renamed parent, or orphaned on purpose)
was killed. Now a server is ended only through the record a command wrote when it started it,
and only while the process at that pid still carries the record's random token.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.local_api import MARK, reap_orphans

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
PREFECTS_OWN = {"PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
SLEEPER = f"import time; time.sleep(120)  # {MARK}"


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _wait(predicate, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def test_a_server_started_by_a_renamed_parent_is_left_alone():
    # `exec -a my-app python app.py`: a live program whose own Prefect server looks ephemeral.
    spawn = (f"import subprocess, time; c = subprocess.Popen([{sys.executable!r}, '-c', "
             f"{SLEEPER!r}, {MARK!r}], env={PREFECTS_OWN!r}); print(c.pid, flush=True); "
             f"time.sleep(120)")
    parent = subprocess.Popen(["bash", "-c", f'exec -a my-app "{sys.executable}" -c "$0"',
                               spawn], stdout=subprocess.PIPE, text=True)
    server = int(parent.stdout.readline())
    try:
        assert _wait(lambda: MARK.encode() in _argv(server))
        assert _argv(parent.pid)[0] == b"my-app"
        reaped = reap_orphans()
        time.sleep(0.5)
        assert server not in reaped and _alive(server)
    finally:
        parent.kill()
        parent.wait()
        _kill(server)


def test_another_program_s_orphaned_server_is_left_alone(tmp_path: Path):
    # Re-parented to init, as Prefect's own ephemeral server is when its program is killed:
    # still not ours to end.
    pid_file = tmp_path / "pid"
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "import time; time.sleep(120)" {MARK} '
                    f'& echo $! > {pid_file}'], env={**os.environ, **PREFECTS_OWN}, check=True)
    orphan = int(pid_file.read_text())
    try:
        assert _wait(lambda: MARK.encode() in _argv(orphan))
        assert orphan not in reap_orphans()
        time.sleep(0.5)
        assert _alive(orphan)
    finally:
        _kill(orphan)


def test_a_record_naming_a_process_without_its_token_ends_nothing(tmp_path: Path):
    # A pid reused by another program after our server died, or a record planted in the cache
    # folder: the process at that pid never carried the token.
    bystander = subprocess.Popen([sys.executable, "-c", SLEEPER, MARK], env={**os.environ,
                                 "RESEARCHFLOW_LOCAL_API_TOKEN": "someone-elses"})
    try:
        (tmp_path / f"{bystander.pid}.json").write_text(json.dumps(
            {"pid": bystander.pid, "token": "0" * 32, "owner": 999_999_999,
             "owner_started": 1}))
        assert reap_orphans(tmp_path) == []
        time.sleep(0.5)
        assert bystander.poll() is None
        assert not (tmp_path / f"{bystander.pid}.json").exists()  # a stale record is dropped
    finally:
        bystander.kill()
        bystander.wait()
