"""A topic's sub-question tasks on a Dask cluster of two worker processes, through prefect-dask.

The cluster is a real LocalCluster (one thread per worker, so both get work); the topic flow
reaches it the way a deployment would, through RESEARCHFLOW_TASK_RUNNER=dask and
RESEARCHFLOW_DASK_ADDRESS. The scheduler's task stream says which worker ran which task. With a
billed model (the real openai SDK against a loopback provider) every provider call made in a
worker must land in the ledger under the topic's run, batch and topic: the ledger's scope lives
in context variables of the flow's process, which a worker only gets because the runner sends
them along.
"""

from __future__ import annotations

import os

import distributed
import pytest

from core.models import Topic, TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from flows.runners import SettingsTaskRunner, close_local_cluster, task_runner
from core.settings import Settings
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import SDK_ENV, TEST_MODELS, ResearchProvider, write_pages

# One worker runs the module: its cluster of two processes is started once.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness"),
              pytest.mark.xdist_group("dask")]

TOPIC = "Compare threading, multiprocessing and asyncio for concurrent I/O"


@pytest.fixture(scope="module")
def provider():
    """A loopback OpenAI, in the environment before the cluster starts (workers inherit it)."""
    fake = ResearchProvider("openai")
    key_var, url_var, suffix = SDK_ENV["openai"]
    with ScriptedServer(default=fake) as server, pytest.MonkeyPatch.context() as env:
        env.setenv(key_var, "sk-test-dask")
        env.setenv(url_var, server.url + suffix)
        yield server


@pytest.fixture(scope="module")
def cluster(provider):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local, \
            distributed.Client(local) as client:
        yield local, client


@pytest.fixture()
def on_dask(cluster, monkeypatch):
    local, client = cluster
    monkeypatch.setenv("RESEARCHFLOW_TASK_RUNNER", "dask")
    monkeypatch.setenv("RESEARCHFLOW_DASK_ADDRESS", local.scheduler_address)
    return client


def _run_on_workers(client, **kwargs) -> tuple[object, list[tuple[str, str]]]:
    """Run the topic flow; (its final state, (task key, worker address) of every task run)."""
    with distributed.get_task_stream(client) as stream:
        state = research_topic(return_state=True, **kwargs)
    assert state.is_completed(), state.message
    return state, [(t["key"], t["worker"]) for t in stream.data]


def _assert_ran_on_both_workers(client, ran: list[tuple[str, str]], subquestions: int) -> None:
    pids = client.run(os.getpid)  # worker address -> its process id
    assert os.getpid() not in pids.values() and len(set(pids.values())) == 2
    research = [w for key, w in ran if key.startswith("research-subquestion-")]
    compress = [w for key, w in ran if key.startswith("compress")]
    assert len(research) == len(compress) == subquestions, ran
    assert set(research) | set(compress) == set(pids), ran  # both worker processes did work


def test_a_topic_researches_on_dask_worker_processes(on_dask, corpus, db_path):
    # Two parts, so two sections even on this three-file corpus (its outline comes from it).
    state, ran = _run_on_workers(
        on_dask, topic="How do threads share memory, and how does asyncio wait without blocking?",
        batch_id="dask",
        options=TopicOptions(max_subquestions=4, max_rounds=1),
        model="offline", search="corpus", corpus_dir=str(corpus), db_path=str(db_path))
    report_id = state.result()
    store = ResultStore(db_path)
    report = store.get_report(report_id)
    assert report is not None and report["citations"]
    assert store.unverified_citations(report_id) == []
    subquestions = store.counts()["subquestions"]
    assert subquestions >= 2
    _assert_ran_on_both_workers(on_dask, ran, subquestions)


def test_every_call_made_in_a_worker_reaches_the_ledger_under_its_topic(on_dask, provider,
                                                                         tmp_path, db_path):
    pages = write_pages(tmp_path / "pages", ("Memory", "Blocking", "Waiting"))
    topic = "Threading vs asyncio for waiting (dask)"
    before = len(provider.requests)
    state, ran = _run_on_workers(
        on_dask, topic=topic, batch_id="dask-billed",
        options=TopicOptions(max_waves=1, max_rounds=1),
        model=TEST_MODELS["openai"], search="corpus", corpus_dir=str(pages),
        db_path=str(db_path))
    run_id = str(state.state_details.flow_run_id)
    topic_id = Topic(text=topic, batch_id="dask-billed").topic_id
    _, rows = query_readonly(db_path, "SELECT role, run_id, batch_id, topic_id, "
                                      "subquestion_index FROM ledger")
    assert len(rows) == len(provider.requests) - before  # every call, once
    assert {(r[1], r[2], r[3]) for r in rows} == {(run_id, "dask-billed", topic_id)}
    in_workers = [r for r in rows if r[0] in ("choose", "condense", "queries", "compress")]
    assert {r[0] for r in in_workers} >= {"choose", "condense", "compress"}
    assert all(r[4] is not None for r in in_workers if r[0] != "compress")
    _assert_ran_on_both_workers(on_dask, ran, ResultStore(db_path).counts()["subquestions"])


def test_settings_choose_the_runner(monkeypatch):
    from prefect.task_runners import ThreadPoolTaskRunner

    chosen = task_runner(Settings.load(max_subquestion_workers=3))
    assert isinstance(chosen, ThreadPoolTaskRunner) and chosen._max_workers == 3
    monkeypatch.setenv("RESEARCHFLOW_TASK_RUNNER", "dask")
    monkeypatch.setenv("RESEARCHFLOW_DASK_ADDRESS", "tcp://127.0.0.1:8786")
    monkeypatch.setenv("RESEARCHFLOW_MAX_SUBQUESTION_WORKERS", "2")
    copy = SettingsTaskRunner().duplicate()  # what a flow run starts with
    assert type(copy).__name__ == "ResearchDaskRunner"
    assert copy.address == "tcp://127.0.0.1:8786" and copy.threads == 2
    assert copy.duplicate().address == copy.address  # nothing is contacted until entered


def test_without_an_address_a_local_cluster_is_started_once(monkeypatch):
    from flows.runners import local_cluster

    try:
        first = local_cluster(2)
        assert first.startswith("tcp://") and local_cluster(2) == first
        with distributed.Client(first) as client:
            assert len(client.scheduler_info()["workers"]) == min(2, os.cpu_count() or 1)
    finally:
        close_local_cluster()


def test_a_signal_raised_in_a_worker_arrives_whole(on_dask):
    """A failed task comes back from its worker as a pickled Prefect state, and pickle rebuilds
    an exception as cls(*args): BudgetExceeded (keyword-only fields) and PageRefused (two
    arguments) would arrive as a TypeError without the runner's reducers."""
    from prefect import flow, task

    from core.signals import BudgetExceeded
    from core.search.fetch_types import PageRefused

    @task(name="over-budget")
    def over_budget() -> None:
        raise BudgetExceeded("topic budget reached", scope="topic", spent=0.5, limit=0.5,
                             projected=0.1, hint="raise --max-cost-usd")

    @task(name="refused")
    def refused() -> None:
        raise PageRefused("https://example.org/x", "not html")

    @flow(task_runner=SettingsTaskRunner())
    def fail_on_a_worker() -> tuple:
        try:
            over_budget.submit().result()
        except BudgetExceeded as exc:
            budget = (exc.scope, exc.spent, exc.limit, str(exc))
        try:
            refused.submit().result()
        except PageRefused as exc:
            return budget + (exc.url, exc.reason)
        raise AssertionError("the tasks did not fail")

    assert fail_on_a_worker() == ("topic", 0.5, 0.5, "topic budget reached (raise --max-cost-usd)",
                                  "https://example.org/x", "not html")


def test_workers_on_dask_write_one_ducklake(on_dask, provider, tmp_path, monkeypatch):
    """Past one machine in small: the research tasks of a billed topic run in two worker
    processes that write their ledger rows into one DuckLake (PostgreSQL catalog) at once."""
    from tests.core.test_ducklake_store import _assert_keys_unique
    from tests.fakes.postgres import Postgres, pg_bin

    bin_dir = pg_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binaries (initdb); .ci/run installs postgresql")
    server = Postgres(bin_dir)
    server.start()
    try:
        target, data = server.new_lake(tmp_path)
        monkeypatch.setenv("RESEARCHFLOW_LAKE_DATA_PATH", data)  # the flow creates the lake
        pages = write_pages(tmp_path / "pages", ("Memory", "Blocking", "Waiting"))
        before = len(provider.requests)
        state, ran = _run_on_workers(
            on_dask, topic="Threading vs asyncio for waiting (lake)", batch_id="lake",
            options=TopicOptions(max_waves=1, max_rounds=1), model=TEST_MODELS["openai"], search="corpus",
            corpus_dir=str(pages), db_path=target)
        store = ResultStore(target)
        report = store.get_report(state.result())
        assert report is not None and report["citations"]
        assert report["usage"].calls == len(provider.requests) - before
        assert store.counts()["ledger"] == report["usage"].calls
        _assert_keys_unique(target)
        _assert_ran_on_both_workers(on_dask, ran, store.counts()["subquestions"])
        from core.store import lake

        seen = on_dask.run(lambda: (lake.backend_for(target).commits,
                                    lake.backend_for(target).conflicts))
        print(f"\nlake writes by worker (commits, conflicts retried): {sorted(seen.values())}")
    finally:
        server.stop()
