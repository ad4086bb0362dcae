"""A rich progress display for the CLI, fed by flows.progress events."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.text import Text
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from core.text.escaping import printable
from flows.progress import Event, subscribe


class LiveProgress:
    """Two bars: topics finished, and sub-questions researched across all running topics."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                                 transient=False)
        self.topics = self.progress.add_task("topics", total=0)
        self.subqs = self.progress.add_task("sub-questions", total=0)
        self._lock = threading.Lock()
        self._unsubscribe = lambda: None

    def add_topics(self, n: int) -> None:
        self.progress.update(self.topics, total=n)

    def _on_event(self, event: Event) -> None:
        with self._lock:
            if event.kind == "topic_planned":
                total = self.progress.tasks[self.subqs].total or 0
                self.progress.update(self.subqs, total=total + event.total)
            elif event.kind == "subquestion_done":
                self.progress.advance(self.subqs)
            elif event.kind in ("topic_done", "topic_failed"):
                self.progress.advance(self.topics)
                mark = ("done", "green") if event.kind == "topic_done" else ("failed", "red")
                # The topic and the detail are text: "[/]" in a topic is not a closing tag.
                self.progress.console.print(Text.assemble(
                    mark, " ", printable(event.topic[:70]), " ", printable(event.detail[:100])))

    def __enter__(self) -> "LiveProgress":
        self._unsubscribe = subscribe(self._on_event)
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._unsubscribe()
        self.progress.stop()
