"""Test-wide isolation: Prefect, caches and keys never leak in from the developer's machine.

Each pytest process (each xdist worker, under `make test`) has its own throwaway Prefect home,
results folder and cache. The processes of one run share one real Prefect server, started the
first time a test asks for it and ended when the run ends. Retries wait no backoff, flows beat
no heartbeat and ship no log lines to the API, except in the tests of them.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before anything imports prefect: its home, results and analytics point at a throwaway place.
_SESSION_DIR = Path(tempfile.mkdtemp(prefix="researchflow-tests-"))
os.environ["PREFECT_HOME"] = str(_SESSION_DIR / "prefect")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_SESSION_DIR / "prefect-results")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_LOGGING_TO_API_BATCH_INTERVAL"] = "0.3"
# Flows here ship no log lines to the Prefect API (subprocesses inherit it): the tests that read
# them there ask for them (`api_logs`). Shipping costs a flow test ~10% of its CPU, its own and
# the server's, for lines no other test reads.
os.environ["PREFECT_LOGGING_TO_API_ENABLED"] = "false"
os.environ["RESEARCHFLOW_CACHE_DIR"] = str(_SESSION_DIR / "cache")
# The run's own folder, shared by its xdist workers: they inherit it from the process that
# starts them (which imported this file first).
if "RESEARCHFLOW_TESTS_RUN_DIR" not in os.environ:
    os.environ["RESEARCHFLOW_TESTS_RUN_DIR"] = tempfile.mkdtemp(prefix="researchflow-test-run-")
_RUN_DIR = Path(os.environ["RESEARCHFLOW_TESTS_RUN_DIR"])
# A retried call is retried at once (the retry rules stay the real ones). Before tasks/ is
# imported: that is when the tasks' delays are fixed. Subprocesses inherit it. The tests of
# the backoff itself use `real_backoff`.
os.environ["RESEARCHFLOW_RETRY_BACKOFF"] = "0"
# Provider limits stay per process: the flow tests share one Prefect server and the provider
# names, so a 429 one test provokes would pause the others' calls. The tests of the shared
# limits (tests/flows/test_shared_limits.py) use them directly.
os.environ["RESEARCHFLOW_SHARED_LIMITS"] = "false"
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
             "SERPAPI_API_KEY", "SERPAPI_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "PREFECT_API_URL"):
    os.environ.pop(_key, None)


def pytest_collection_modifyitems(config, items) -> None:
    """Slow tests first (stable otherwise): on parallel workers the long ones start early and
    the many short ones fill in the end, instead of one worker finishing a long test alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session) -> None:
    """A worker under `--dist loadgroup` refuses to run if xdist could not mark its groups
    (pytest 9.2 with xdist 3.8 silently lost them: grouped tests then ran side by side)."""
    config = session.config
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise RuntimeError(f"xdist_group marks were not applied ({len(lost)} tests, "
                                f"e.g. {lost[0]}): check the pytest and pytest-xdist pins")


@pytest.fixture(scope="session", autouse=True)
def _no_heartbeats() -> Iterator[None]:
    """Flows run here beat no heartbeat: the heartbeat thread sleeps in 1 s steps and a flow
    waits for it to notice the end, up to 1 s per top-level flow. (Prefect's setting cannot be
    turned off from the environment, so flows in subprocesses still beat theirs.)"""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


@functools.cache
def _shared_server():
    from tests.fakes.prefect_server import SharedServer

    return SharedServer(_RUN_DIR / "prefect-server")


def pytest_unconfigure(config) -> None:
    """The process that owns the run (not an xdist worker) ends the shared server."""
    if not hasattr(config, "workerinput"):
        _shared_server().stop()
        shutil.rmtree(_RUN_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_prefect():
    """The run's SharedServer (tests/fakes/prefect_server.py)."""
    return _shared_server()


@pytest.fixture(scope="session")
def prefect_server(shared_prefect) -> str:
    """The run's real `prefect server start` (one for all xdist workers): its API URL.

    Started on first use (~30 s of CPU) and shared by the flow tests (`prefect_harness`), the
    deployments a worker or `researchflow serve` runs, and a retry by `prefect flow-run retry`.
    Tests that need a server of their own settings (`researchflow ui`) start their own.
    """
    return shared_prefect.url()


@pytest.fixture(scope="session")
def prefect_harness(prefect_server: str) -> Iterator[None]:
    """Flows run in this process report to the session's Prefect server."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: prefect_server}):
        yield
        _drain_prefect_workers()  # before the server stops, or their last sends fail


def _drain_prefect_workers() -> None:
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=10)
        except RuntimeError:  # never started
            pass


@pytest.fixture
def api_logs(monkeypatch) -> Iterator[None]:
    """Log lines shipped to the Prefect API, by this process and the ones it starts."""
    from prefect.settings import PREFECT_LOGGING_TO_API_ENABLED, temporary_settings

    monkeypatch.setenv("PREFECT_LOGGING_TO_API_ENABLED", "true")
    with temporary_settings({PREFECT_LOGGING_TO_API_ENABLED: True}):
        yield


@pytest.fixture
def real_backoff(monkeypatch) -> None:
    """The provider-calling tasks wait the shipped backoff between retries (2, 4, 8 ... s)."""
    from prefect.tasks import Task, exponential_backoff

    import tasks.research
    import tasks.write
    from core.settings import Settings
    from tasks.retry import RETRIES, retry_on_signal

    shipped = exponential_backoff(Settings.model_fields["retry_backoff"].default)(RETRIES)
    for module in (tasks.research, tasks.write):
        for task in vars(module).values():
            if isinstance(task, Task) and task.retry_condition_fn is retry_on_signal:
                monkeypatch.setattr(task, "retry_delay_seconds", shipped)


@pytest.fixture(scope="session")
def session_dir() -> Path:
    return _SESSION_DIR
