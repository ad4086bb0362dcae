"""In-process progress events, so the CLI can draw a rich progress bar while flows run.

Flows emit small events; anything that registered a listener (the CLI) hears them. Listeners
must never break a run, so their errors are swallowed. Prefect progress artifacts are created by
the flows themselves; this is only the terminal's view.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Literal

Kind = Literal["topic_started", "topic_planned", "subquestion_done", "topic_done", "topic_failed"]


@dataclass(frozen=True)
class Event:
    kind: Kind
    topic: str
    total: int = 0  # sub-questions planned, on topic_planned
    detail: str = ""


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


def emit(kind: Kind, topic: str, total: int = 0, detail: str = "") -> None:
    event = Event(kind, topic, total, detail)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # noqa: BLE001 - a broken progress bar must not fail research
            pass
