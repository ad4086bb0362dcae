"""The task runner of a topic's sub-question tasks: threads in this process, or a Dask cluster.

`SettingsTaskRunner` is what the topic flow is declared with. It does nothing until Prefect
starts a flow run and asks it for its copy (`duplicate()`); it then returns the runner that the
settings of that moment choose, so a deployment's worker takes its runner from its own
environment, and nothing is started at import:

    threads  (default)  ThreadPoolTaskRunner, RESEARCHFLOW_MAX_SUBQUESTION_WORKERS threads
    dask                prefect-dask on the scheduler at RESEARCHFLOW_DASK_ADDRESS
                        (tcp://host:8786) or, without one, on a LocalCluster of worker
                        processes that this process starts on first use and keeps until it
                        exits (the topics of a batch share it); as many threads in all

A task needs more than its inputs from the process that submits it. Prefect sends its own
context along (the flow run, settings, tags); the ledger's scope (run, batch, topic, budgets)
and role are context variables of core.accounting.ledger, which a thread pool copies but a Dask
worker never sees. So every function this runner hands to Dask is wrapped in `InScope`: the scope
and role of the submitting code, set around the call in the worker, whose ledger is flushed before
the result goes back, so every usage row is in the store when the future resolves.

Shared by every worker through the Prefect API: each provider's calls and tokens per minute and a
rate limit's pause (tasks/shared_pacing.py), and the keys a worker's environment lacks, from Secret
blocks (tasks/secret_blocks.py). Still per process, and a Dask worker is one: the running spend
the budget checks use (seeded from the store once, so a cap can be overshot by what other
processes spend meanwhile), the learned model limits (read from the store when a process first
needs them; every process writes what it learns), and the built clients. A worker must import
the same researchflow and reach the store and the Prefect API. With a single DuckDB file every worker process takes its
turn at the file; across machines use a DuckLake store (core.store.lake).
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import sys
import threading
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from core.accounting.ledger import CallScope, acting_as, current_role, current_scope, scoped
from core.settings import Settings
from core.accounting.usage import CallRole
from flows.attempts import note_attempt
from flows.run_log import forward_store_logs
from tasks import contexts


def task_runner(settings: Settings | None = None) -> TaskRunner:
    """The runner the settings choose."""
    settings = settings or Settings.load()
    size = settings.max_subquestion_workers
    if settings.task_runner == "dask":
        return dask_runner(settings.dask_address, threads=size)
    return ThreadPoolTaskRunner(max_workers=size)


class SettingsTaskRunner(TaskRunner):
    """Chooses the runner (`task_runner`) when a flow run starts; runs nothing itself."""

    def duplicate(self) -> TaskRunner:
        settings = Settings.load()
        if in_dask_worker():
            # Prefect rebuilds a task's flow context in the worker and enters a copy of the
            # flow's runner there too. A LocalCluster cannot start in a worker (a daemonic
            # process has no children) and a client per task would cost a connection to the
            # scheduler: what a task submits inside a worker stays in that worker.
            return ThreadPoolTaskRunner(max_workers=settings.max_subquestion_workers)
        return task_runner(settings)

    def submit(self, task: Any, parameters: dict[str, Any], wait_for: Any = None,
               dependencies: Any = None) -> Any:
        raise RuntimeError("SettingsTaskRunner only chooses a runner; Prefect submits tasks "
                           "to the runner its duplicate() returns")


def in_dask_worker() -> bool:
    """Whether this code runs in a task on a Dask worker."""
    if "distributed" not in sys.modules:  # never imported: not a worker, and no import paid
        return False
    import distributed

    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class InScope:
    """A function sent to a Dask worker, with the ledger scope and role of its submitter."""

    fn: Callable[..., Any]
    scope: CallScope
    role: CallRole

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        note_attempt(kwargs)  # a rerun after a lost worker says so in the task's log
        forward_store_logs()  # and so does a lake commit that conflicted, in this worker
        with scoped(**asdict(self.scope)), acting_as(self.role):
            try:
                return self.fn(*args, **kwargs)
            finally:
                contexts.flush()  # a record kept back by a busy store goes now, not never


def dask_runner(address: str | None, *, threads: int) -> TaskRunner:
    """prefect-dask's runner on the scheduler at `address`, or on this process's LocalCluster
    of about `threads` threads in all."""
    runner_class, _ = _dask_classes()
    return runner_class(address, threads=threads)


@functools.cache
def _dask_classes() -> tuple[type, type]:
    """Built on first use: prefect-dask is an optional extra, and importing it costs ~1 s."""
    try:
        import distributed
        from prefect_dask import DaskTaskRunner
        from prefect_dask.client import PrefectDaskClient
    except ImportError as exc:
        raise RuntimeError("RESEARCHFLOW_TASK_RUNNER=dask needs prefect-dask: "
                           "pip install 'researchflow[dask]'") from exc

    class CarryScope(distributed.Client):
        def submit(self, func: Any, *args: Any, key: Any = None, **kwargs: Any) -> Any:
            # Runs in the submitting thread, inside the flow's scope; the key keeps the task's
            # name, so the scheduler's task stream says what ran where.
            name = getattr(func, "name", None) or getattr(func, "__name__", "task")
            return super().submit(InScope(func, current_scope(), current_role()), *args,
                                  key=key or f"{name}-{uuid.uuid4().hex}", **kwargs)

    class ScopedDaskClient(PrefectDaskClient, CarryScope):
        """PrefectDaskClient.submit wraps a Prefect task into a plain function and passes it
        on to the next submit in line, which is CarryScope's."""

    class ResearchDaskRunner(DaskTaskRunner):
        def __init__(self, address: str | None = None, *, threads: int = 4) -> None:
            super().__init__(address=address)
            self.threads = threads

        def duplicate(self) -> "ResearchDaskRunner":
            return type(self)(self.address, threads=self.threads)

        def __enter__(self) -> "ResearchDaskRunner":
            super().__enter__()
            address = self.address or local_cluster(self.threads)
            # Set before DaskTaskRunner.client would build a plain PrefectDaskClient.
            self._client = self._exit_stack.enter_context(
                ScopedDaskClient(address, set_as_default=False))
            return self

    return ResearchDaskRunner, ScopedDaskClient


_cluster: Any = None
_cluster_lock = threading.Lock()


def local_cluster(threads: int) -> str:
    """The scheduler address of this process's LocalCluster, started on first use: one worker
    process per core (at most `threads`), `threads` threads in all."""
    global _cluster
    with _cluster_lock:
        if _cluster is None or _cluster.status.name in ("closing", "closed", "failed"):
            import distributed

            workers = max(1, min(threads, os.cpu_count() or 1))
            _cluster = distributed.LocalCluster(
                n_workers=workers, threads_per_worker=math.ceil(threads / workers),
                processes=True, dashboard_address=":0")
            atexit.register(close_local_cluster)
        return _cluster.scheduler_address


def close_local_cluster() -> None:
    """Stop this process's LocalCluster, if one was started."""
    global _cluster
    with _cluster_lock:
        cluster, _cluster = _cluster, None
    if cluster is not None:
        cluster.close()
