"""In-process progress events, so the CLI can draw a rich progress bar while flows run.

Flows emit small events; anything that registered a listener (the CLI) hears them. Listeners
must never break a run, so their errors are swallowed. `ProgressArtifact` is the Prefect UI's
view: a progress artifact updated at most every few seconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Literal

from prefect.artifacts import create_progress_artifact, update_progress_artifact

Kind = Literal["topic_started", "topic_planned", "plan_review", "subquestion_done", "topic_done",
               "topic_failed"]


@dataclass(frozen=True)
class Event:
    kind: Kind
    topic: str
    total: int = 0  # sub-questions planned, on topic_planned
    detail: str = ""
    data: object = None  # plan_review: (the plan as a PlanEdit, what a timeout does)


_listeners: list[Callable[[Event], None]] = []
_lock = threading.Lock()


def subscribe(listener: Callable[[Event], None]) -> Callable[[], None]:
    with _lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unsubscribe


def emit(kind: Kind, topic: str, total: int = 0, detail: str = "", data: object = None) -> None:
    event = Event(kind, topic, total, detail, data)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # noqa: BLE001 - a broken progress bar must not fail research
            pass


class ProgressArtifact:
    """A Prefect progress artifact whose updates are spaced out.

    Each update is a blocking API call (50 ms on a busy server) on the thread that collects a
    topic's results; the UI needs a figure every few seconds, not one per sub-question. The
    final update (100 %) is always sent.
    """

    def __init__(self, description: str, *, key: str | None = None,
                 every_seconds: float = 2.0) -> None:
        self.every = every_seconds
        # A key lists the artifact on the UI's Artifacts page (unkeyed ones show only in a run).
        self._id = create_progress_artifact(0.0, key=key, description=description)
        self._sent = time.monotonic()

    def update(self, percent: float, description: str) -> None:
        now = time.monotonic()
        if percent < 100.0 and now - self._sent < self.every:
            return
        self._sent = now
        update_progress_artifact(self._id, percent, description=description)
