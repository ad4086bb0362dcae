"""A CSV batch on Dask worker processes: on the runner's own LocalCluster, and on a `dask
scheduler` with two `dask worker` processes (the README's *Past one machine*, in small) writing
one DuckLake, including when one worker is killed (`kill -9`) while the batch researches.

What broke here before: every topic of a batch failed on Dask, because the topic task's
parameters (a `threading.Event` in the batch's budget) travel in the run context prefect-dask
pickles with every research task, and a worker's copy of the flow's runner tried to start a
LocalCluster inside the worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import distributed
import pytest

from core.store import ResultStore, query_readonly
from flows.batch import research_batch
from flows.runners import close_local_cluster, local_cluster
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.fakes.prefect_server import free_port
from tests.fakes.research_provider import SDK_ENV, TEST_MODELS, ResearchProvider, write_pages

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ["Threading vs asyncio for waiting on sockets",
          "Threading vs asyncio for memory per connection",
          "Threading vs asyncio for blocking calls"]


@pytest.fixture(autouse=True)
def patient_api():
    """The test server keeps its database in SQLite, which answers 503 while another write
    holds it; on a busy machine the client's 5 retries can run out mid-batch."""
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    with temporary_settings({PREFECT_CLIENT_MAX_RETRIES: 20}):
        yield


def _csv(path: Path, topics: list[str], subquestions: int = 3) -> Path:
    rows = [f'"{t}",{subquestions},1,1' for t in topics]
    path.write_text("topic,max_subquestions,max_rounds,max_waves\n" + "\n".join(rows) + "\n",
                    encoding="utf-8")
    return path


def _assert_every_topic_once(target: str, batch_id: str, topics: list[str]) -> None:
    _, rows = query_readonly(target, "SELECT topic, status, report_id FROM topics "
                                     "WHERE batch_id = ?", [batch_id])
    assert sorted(r[0] for r in rows) == sorted(topics)
    assert {r[1] for r in rows} == {"succeeded"}
    _, reports = query_readonly(target, "SELECT report_id FROM reports WHERE batch_id = ?",
                                [batch_id])
    assert sorted(r[0] for r in reports) == sorted(r[2] for r in rows)


class HeldProvider:
    """The loopback OpenAI, with a pause: at the `hold_at`-th condense request every request
    waits until the test has killed a worker; those held are then answered 503 (a passing
    fault, retried), so a reply that never reached a dead worker is not a success."""

    def __init__(self, hold_at: int | None = None) -> None:
        self.fake = ResearchProvider("openai")
        self.hold_at = hold_at
        self.condense = 0
        self.holding = threading.Event()
        self.released = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, rec: Recorded) -> Reply:
        with self._lock:
            if b"pick the evidence on one web page" in rec.body:
                self.condense += 1
                if self.hold_at is not None and self.condense == self.hold_at:
                    self.holding.set()
        if self.holding.is_set() and not self.released.is_set():
            self.released.wait(120)
            return Reply(503, {"error": {"message": "held while a worker was lost",
                                         "type": "server_error"}})
        return self.fake(rec)


@pytest.fixture(scope="module")
def provider():
    """A loopback OpenAI in the environment before any worker starts (workers inherit it)."""
    handler = HeldProvider()
    key_var, url_var, suffix = SDK_ENV["openai"]
    with ScriptedServer(default=handler) as server, pytest.MonkeyPatch.context() as env:
        env.setenv(key_var, "sk-test-dask-batch")
        env.setenv(url_var, server.url + suffix)
        yield handler


@pytest.fixture(scope="module")
def lake_server():
    from tests.fakes.postgres import Postgres, pg_bin

    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binaries (initdb); .ci/run installs postgresql")
    server = Postgres(bin_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def dask_processes(provider, prefect_harness, tmp_path_factory):
    """`dask scheduler` and two `dask worker` processes, as a user starts them, from this venv
    with this checkout on the path and this Prefect's settings in their environment."""
    from prefect.settings import get_current_settings

    folder = tmp_path_factory.mktemp("dask")
    env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True),
           "PYTHONPATH": str(ROOT)}
    dask = str(Path(sys.executable).with_name("dask"))
    address = f"tcp://127.0.0.1:{free_port()}"
    started = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port",
                                 address.rsplit(":", 1)[1], "--no-dashboard"], env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=open(folder / "scheduler.log", "w"))]
    try:
        for n in range(2):
            started.append(subprocess.Popen(
                [dask, "worker", address, "--nworkers", "1", "--nthreads", "1",
                 "--no-dashboard", "--local-directory", str(folder / f"w{n}")], env=env, cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=open(folder / f"worker{n}.log", "w")))
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            yield address, client
    finally:
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def test_a_batch_runs_on_the_runners_own_local_cluster(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("RESEARCHFLOW_TASK_RUNNER", "dask")
    monkeypatch.delenv("RESEARCHFLOW_DASK_ADDRESS", raising=False)
    monkeypatch.setenv("RESEARCHFLOW_MAX_SUBQUESTION_WORKERS", "2")
    db = str(tmp_path / "store.duckdb")
    try:
        address = local_cluster(2)  # the one the batch's topics will find and share
        with distributed.Client(address) as client, \
                distributed.get_task_stream(client) as stream:
            state = research_batch(csv_path=str(_csv(tmp_path / "local.csv", TOPICS)),
                                   model="offline", search="corpus", corpus_dir=str(corpus),
                                   db_path=db, return_state=True)
            workers = client.run(os.getpid)
        assert state.is_completed(), state.message
        _assert_every_topic_once(db, "local", TOPICS)
        research = {t["worker"] for t in stream.data
                    if t["key"].startswith("research-subquestion-")}
        assert len(workers) == min(2, os.cpu_count() or 1) and research == set(workers)
    finally:
        close_local_cluster()


def test_a_batch_on_dask_workers_writes_every_topic_once_into_one_lake(
        dask_processes, provider, lake_server, tmp_path, monkeypatch):
    from tests.core.test_ducklake_store import _assert_keys_unique

    address, client = dask_processes
    target, data = lake_server.new_lake(tmp_path)
    monkeypatch.setenv("RESEARCHFLOW_LAKE_DATA_PATH", data)
    monkeypatch.setenv("RESEARCHFLOW_TASK_RUNNER", "dask")
    monkeypatch.setenv("RESEARCHFLOW_DASK_ADDRESS", address)
    pages = write_pages(tmp_path / "pages", ("Memory", "Blocking", "Waiting"))
    before = provider.fake.successes
    with distributed.get_task_stream(client) as stream:
        state = research_batch(csv_path=str(_csv(tmp_path / "lake.csv", TOPICS)),
                               model=TEST_MODELS["openai"], search="corpus",
                               corpus_dir=str(pages), db_path=target, return_state=True)
    assert state.is_completed(), state.message
    _assert_every_topic_once(target, "lake", TOPICS)
    _assert_keys_unique(target)
    assert ResultStore(target).counts()["ledger"] == provider.fake.successes - before
    workers = {t["worker"] for t in stream.data if t["key"].startswith("research-subquestion-")}
    assert workers == set(client.run(os.getpid))  # both worker processes researched


@pytest.mark.usefixtures("api_logs")  # a task's settings travel with it to the worker
def test_a_worker_killed_mid_batch_costs_no_repeated_call_and_says_so_in_prefect(
        dask_processes, provider, lake_server, tmp_path, monkeypatch):
    address, client = dask_processes
    target, data = lake_server.new_lake(tmp_path)
    monkeypatch.setenv("RESEARCHFLOW_LAKE_DATA_PATH", data)
    monkeypatch.setenv("RESEARCHFLOW_TASK_RUNNER", "dask")
    monkeypatch.setenv("RESEARCHFLOW_DASK_ADDRESS", address)
    pages = write_pages(tmp_path / "pages", ("Memory", "Blocking", "Waiting"))
    topics = [t + " (killed)" for t in TOPICS]
    provider.hold_at = provider.condense + 4
    repeated_before = provider.fake.repeated_successes
    killed: list[int] = []

    def kill_a_researching_worker() -> None:
        assert provider.holding.wait(300), "the batch never reached its fourth page"
        # Every request from now on is held; a thread whose last call was answered just before
        # is still writing that answer to the memo (a store write, slow on a busy machine). A
        # kill in the middle of that write loses the answer whatever the order of writes, so
        # the kill waits for them: what is measured is a worker lost while its calls are in
        # flight, not while the store takes a write.
        time.sleep(2.0)
        pids = client.run(os.getpid)
        busy = [w for w, keys in client.processing().items()
                if any(str(k).startswith("research-subquestion-") for k in keys)]
        victim = pids[busy[0] if busy else next(iter(pids))]
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)
        time.sleep(1.0)  # the held replies go to a dead process, or to one that retries
        provider.released.set()

    killer = threading.Thread(target=kill_a_researching_worker, daemon=True)
    killer.start()
    try:
        state = research_batch(csv_path=str(_csv(tmp_path / "killed.csv", topics)),
                               model=TEST_MODELS["openai"], search="corpus",
                               corpus_dir=str(pages), db_path=target, return_state=True)
    finally:
        provider.released.set()
        killer.join(10)
    assert killed, "no worker was killed"
    assert state.is_completed(), state.message
    _assert_every_topic_once(target, "killed", topics)
    assert provider.fake.repeated_successes == repeated_before  # no successful call made twice
    client.wait_for_workers(2, timeout=120)  # the nanny brought the killed worker back
    assert killed[0] not in client.run(os.getpid).values()
    assert _logged("was lost before it reported back"), "the rerun is not in Prefect's logs"


def _logged(text: str, timeout: float = 30.0) -> bool:
    """Whether a log line of the Prefect API contains `text` (logs arrive in batches)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import LogSort

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as api:
        while time.monotonic() < deadline:
            if any(text in entry.message for entry in api.read_logs(limit=200, sort=LogSort.TIMESTAMP_DESC)):
                return True
            time.sleep(1.0)
    return False
