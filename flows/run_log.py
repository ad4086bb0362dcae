"""Log lines of researchflow's own that a person needs in the Prefect UI, forwarded to the log
of the flow or task run that wrote them.

`core` never imports Prefect, so a DuckLake commit that conflicted with another writer and was
run again is logged on `researchflow.store.lake`, where nobody looks. `forward_store_logs()`
(idempotent, called when a flow starts and before a task runs on a Dask worker) attaches a
handler that hands each record to the current run's logger; outside a run it does nothing.
It also drops the task engine's "Finished in state Completed()" lines: half of a topic's log
said only that, while the task list shows every state anyway (failures, retries and cache hits
still log), and its "Task run failed with state: ..." line for a task that returned a Failed
state (a batch's failed row): its "Finished in state Failed(...)" line says it.

An expected failure (core.topics.failures.expected: no evidence, a provider's typed no, a batch
with failed rows) is one line in the run's log: the flow returns a Failed state whose message is
that line, and Prefect logs it as "Finished in state Failed(...)". Run by a worker or `serve`
(`python -m prefect.engine`), Prefect then raises the state's exception once more on its way
out and logs it whole as "Engine execution exited with unexpected exception": that record is
dropped for an expected failure. Any other exception keeps its traceback.
"""

from __future__ import annotations

import logging
import threading

FORWARDED = ("researchflow.store.lake", "researchflow.fallback")

_installed = False
_lock = threading.Lock()


class _NoCompletedLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        # A task that returns a Failed state (a batch's failed row) said why in its message,
        # which "Finished in state Failed(...)" logs; Prefect's repr of the whole state, its
        # data included, said it again.
        return (message != "Finished in state Completed()"
                and not message.startswith("Task run failed with state: "))


class _ExpectedOnce(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from core.topics.failures import expected

        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and expected(exc)
                    and record.msg == "Engine execution exited with unexpected exception")


class _ToRunLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        from prefect import get_run_logger
        from prefect.exceptions import MissingContextError

        try:
            logger = get_run_logger()
        except MissingContextError:  # not inside a run: nobody's log to write to
            return
        try:
            logger.log(record.levelno, record.getMessage())
        except Exception:  # noqa: BLE001 - a log line must never fail the write it reports
            self.handleError(record)


def forward_store_logs() -> None:
    """Forward INFO and above of the store's DuckLake logger to the current run's log."""
    global _installed
    with _lock:
        if _installed:
            return
        logging.getLogger("prefect.task_runs").addFilter(_NoCompletedLines())
        logging.getLogger("prefect.flow_runs").addFilter(_ExpectedOnce())
        for name in FORWARDED:
            logger = logging.getLogger(name)
            logger.addHandler(_ToRunLog(logging.INFO))
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
        _installed = True
