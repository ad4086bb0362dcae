"""A task that Dask runs again because its worker was lost says so in its Prefect log.

Dask reruns a task elsewhere when the worker running it dies (a `kill -9`, a machine gone, the
nanny restarting a worker over its memory limit); Prefect sees nothing of it: the new attempt
reuses the task run id, its run count stays 1, and the lost attempt's logs died with it. So
every task sent to Dask counts its attempts on the scheduler (which outlives its workers), by
the Dask key that stays the same across reruns, and the second and later attempts write a
warning into the task run's log, where a person looks: which attempt this is, and which
worker was running the one before.

The answers a lost worker was paid for are kept too: a worker's call memos write what waits in
their batch before each new call (`tasks.contexts.losable`), and the worker that takes a lost
task over reads the store afresh (`tasks.contexts.look_again`), so the new attempt is served them.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("researchflow.flows")

_NAMESPACE = "researchflow-attempts"


def note_attempt(run_task_kwargs: dict[str, Any]) -> None:
    """In a Dask worker, before prefect-dask runs the task `run_task_kwargs` describe: count
    this attempt, and from the second on add a hook to the task that logs it to its run."""
    import distributed

    try:
        worker = distributed.get_worker()
    except ValueError:  # not in a worker (a plain call): nothing to count
        return
    key = worker.get_current_task()
    if key is None:
        return
    from tasks import contexts

    contexts.losable()  # a worker may die mid-call: its paid answers are written first
    try:
        client = distributed.get_client()
        path = [_NAMESPACE, str(key)]
        before = client.get_metadata(path, default=None)
        attempt = 1 + (before["attempt"] if before else 0)
        client.set_metadata(path, {"attempt": attempt, "worker": worker.address})
    except Exception as exc:  # noqa: BLE001 - counting must never fail the task itself
        log.warning("could not count the attempts of Dask task %s: %s", key, exc)
        return
    task = run_task_kwargs.get("task")
    if attempt > 1 and task is not None:
        note = (f"attempt {attempt} of this task on Dask: the worker that ran attempt "
                f"{attempt - 1} ({before['worker']}) was lost before it reported back; "
                f"running again on {worker.address} (finished steps come from the cache)")
        contexts.look_again()  # the lost attempt's last answers are in the store
        say = _Say(note)
        run_task_kwargs["task"] = task.with_options(
            on_running=[*task.on_running_hooks, say],
            on_completion=[*task.on_completion_hooks, say])


class _Say:
    """A state hook writing one warning to the task run's log, once (a task served from the
    cache never enters Running, hence on completion too)."""

    def __init__(self, note: str) -> None:
        self.note = note
        self.said = False
        self.__name__ = "note-lost-worker"

    def __call__(self, task: Any, task_run: Any, state: Any) -> None:
        from prefect.logging.loggers import task_run_logger

        if not self.said:
            self.said = True
            task_run_logger(task_run, task).warning(self.note)
