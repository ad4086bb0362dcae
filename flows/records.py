"""What the flows write about a run in the store, written once for both (a lone topic, a batch).

    store = start_run(config, settings, run_id, batch_id)   the run's row: running (may raise)
    record(store.record_failure, ...)                        any store write that must not raise
    finish_run(store, run_id, failed=...)                    succeeded or failed
    usage(config, run_id, topic_id)                          what it spent (every record in)
    usage_line(config, run_id, topic_id)                     the same, as one line

A store write that fails (a locked file) never hides a topic's own error nor costs a batch its
closing table: `record` logs what could not be recorded and goes on.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from core.accounting.usage import UsageTotals
from core.settings import RunConfig, Settings
from tasks import contexts
from tasks.contexts import context_for

log = logging.getLogger("researchflow.flows")


def start_run(config: RunConfig, settings: Settings, run_id: str, batch_id: str) -> Any:
    """The store, with the run recorded as running (a retry of the run is harmless).
    Raises StoreError when the store cannot be opened in time."""
    store = context_for(config).store
    store.start_run(run_id, batch_id, engine=config.model, search_backend=config.search,
                    settings_public=settings.public_dict())
    return store


def finish_run(store: Any, run_id: str, *, failed: bool) -> None:
    record(store.finish_run, run_id, "failed" if failed else "succeeded")


def record(write: Callable[..., Any], *args: Any) -> None:
    """Call a store write that never raises (see the module docstring)."""
    from core.store import StoreError

    try:
        write(*args)
    except StoreError as exc:
        log.error("could not record (%s): %s", getattr(write, "__name__", "write"), exc)


def usage(config: RunConfig, run_id: str, topic_id: str | None = None) -> UsageTotals:
    """What the run (or one topic of it) spent so far, once every record of this process is
    in the store (a topic's extractive research runs on a config of its own)."""
    contexts.flush()
    return context_for(config).usage(run_id, topic_id)


def usage_line(config: RunConfig, run_id: str, topic_id: str | None = None) -> str:
    """What the run (or one topic of it) spent so far, as one line."""
    return usage(config, run_id, topic_id).line()
