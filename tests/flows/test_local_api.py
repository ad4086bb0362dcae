"""No orphaned Prefect API: a CLI command's own server dies with it, even on SIGKILL, and one of
ours that outlived its command anyway is ended by the next command, recognised by the record
and the token it was started with. (tests/security/test_reaping.py: nobody else's is.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.local_api import LOCAL_SERVER_SETTINGS, MARK, TOKEN_VARIABLE, reap_orphans, spawn_owned

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
ROOT = Path(__file__).resolve().parents[2]


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
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), RESEARCHFLOW_MODEL="offline",
               RESEARCHFLOW_CACHE_DIR=str(tmp_path / "cache"))
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "researchflow"), "run", "threads or asyncio",
         "--corpus", str(corpus), "--db", str(tmp_path / "s.duckdb")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers: list[int] = []
    try:
        assert _wait(lambda: servers.extend(_children_with(MARK, command.pid)) or servers, 60)
        # Started through public settings only, with our token, and recorded.
        environ = Path(f"/proc/{servers[0]}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.startswith(b"PREFECT__")]
        assert b"PREFECT_UI_ENABLED=0" in environ
        assert [v for v in environ if v.startswith(TOKEN_VARIABLE.encode() + b"=")]
        # The record is written just after the child starts: the child may be seen first.
        record = tmp_path / "cache" / "local-api" / f"{servers[0]}.json"
        assert _wait(record.exists, 10)
    finally:
        command.kill()
        command.wait()
    assert _wait(lambda: not _alive(servers[0]), 10), "the API server outlived its command"


OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from flows.local_api import spawn_owned
child = spawn_owned([sys.executable, "-c", "import time; time.sleep(120)"], {},
                    records=Path(sys.argv[2]), die_with_parent=sys.argv[3] == "1")
print(child.pid, flush=True)
time.sleep(120)
"""


def _owner(records: Path, die_with_parent: bool) -> tuple[subprocess.Popen, int]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(ROOT), str(records),
                              "1" if die_with_parent else "0"], stdout=subprocess.PIPE, text=True)
    return owner, int(owner.stdout.readline())


def test_a_server_of_ours_left_by_a_killed_command_is_reaped(tmp_path: Path):
    # The kernel's parent-death signal can miss (a platform without it, a race at start): the
    # record and the token still name the server.
    owner, server = _owner(tmp_path, die_with_parent=False)
    try:
        record = json.loads((tmp_path / f"{server}.json").read_text())
        assert record["owner"] == owner.pid and len(record["token"]) == 32
        owner.kill()
        owner.wait()
        assert _alive(server)
        assert reap_orphans(tmp_path) == [server]
        assert _wait(lambda: not _alive(server), 10)
        assert not list(tmp_path.glob("*.json"))
    finally:
        if _alive(server):
            os.kill(server, signal.SIGKILL)


def test_a_server_whose_command_still_runs_is_left_alone(tmp_path: Path):
    owner, server = _owner(tmp_path, die_with_parent=True)
    try:
        assert reap_orphans(tmp_path) == []
        assert _alive(server) and (tmp_path / f"{server}.json").exists()
    finally:
        owner.kill()
        owner.wait()
    assert _wait(lambda: not _alive(server), 10)  # and it dies with its command


def test_the_server_settings_are_prefect_s_public_ones():
    from prefect.settings.models.server.services import ServerServicesSettings

    assert not [name for name in LOCAL_SERVER_SETTINGS if name.startswith("PREFECT__")]
    fields = {f"PREFECT_SERVER_SERVICES_{n.upper()}_ENABLED"
              for n in ServerServicesSettings.model_fields}
    assert set(LOCAL_SERVER_SETTINGS) - {"PREFECT_UI_ENABLED"} <= fields


def test_the_local_server_writes_to_its_log_and_holds_no_key(tmp_path: Path, capfd):
    """What the command's own server prints (a service's shutdown traceback, say) stays out of
    the user's terminal, and it is handed no provider's key."""
    from flows.local_api import _without_keys

    env = {"PATH": os.environ.get("PATH", ""), "OPENAI_API_KEY": "sk-x", "SERPAPI_KEY": "s",
           "PGPASSWORD": "p", "PREFECT_HOME": "/h"}
    assert _without_keys(env) == {"PATH": env["PATH"], "PREFECT_HOME": "/h"}
    log = tmp_path / "server.log"
    child = spawn_owned([sys.executable, "-c", "import sys; print('out'); "
                         "print('Traceback (most recent call last):', file=sys.stderr)"],
                        _without_keys({**os.environ, **env}), records=tmp_path, log=log)
    child.wait(timeout=60)
    seen = capfd.readouterr()
    assert "Traceback" not in seen.err and "out" not in seen.out
    assert "out" in log.read_text() and "Traceback" in log.read_text()


def test_a_server_that_does_not_start_keeps_the_log_its_error_names(tmp_path: Path) -> None:
    # The error says "its output: <log>"; the command's exit must not delete that file.
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), RESEARCHFLOW_CACHE_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", "from flows.local_api import LocalApiError, ensure_api\n"
         "try:\n    ensure_api(timeout=0.2)\nexcept LocalApiError as exc:\n    print(exc)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "did not answer within 0 s (its output: " in done.stdout, done.stdout + done.stderr
    log = Path(done.stdout.rsplit("its output: ", 1)[1].split(")")[0])
    assert log.parent == tmp_path / "local-api" and log.is_file()
    assert not list(log.parent.glob("*.json"))  # its record is gone, as the server is
