"""The plan's review for a CLI command: on the terminal, or a pointer to the Prefect UI.

A topic flow with review_plan pauses (flows.plan_review) and emits `plan_review`. Without a
Prefect server (the command started its own API, which nobody else can see), `TerminalReview`
shows the plan, takes the changes typed at the prompt and resumes the paused run through the
API with them, as the UI's form would: one path for both. With a server, `UiNotice` prints
where the form is. Topics of a batch are reviewed one after another.

At the end of input (stdin closed, not a terminal) the answer is what the timeout would have
done: the plan as it is (review_on_timeout=proceed) or the topic cancelled.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from core.topics.plan_edits import MAX_REVIEWED, PlanEdit, PlannedQuestion
from flows.console import plain
from flows.progress import Event

HELP = ("y: research it · n: cancel the topic · e N: edit sub-question N · d N: drop N · "
        "a: add one")


class TerminalReview:
    """Listens for plan_review events and answers each from the terminal."""

    def __init__(self, console: Console, *, pause_display: Callable[[], Any] | None = None,
                 resume_display: Callable[[], Any] | None = None,
                 ask: Callable[[str], str] = input) -> None:
        self.console, self.ask = console, ask
        self.pause_display = pause_display or (lambda: None)
        self.resume_display = resume_display or (lambda: None)
        self._one_at_a_time = threading.Lock()
        self.threads: list[threading.Thread] = []

    def __call__(self, event: Event) -> None:
        if event.kind != "plan_review":
            return
        # The flow pauses right after it emits: the prompt runs beside it, not in its thread,
        # with the flow thread's context (Prefect's settings, the command's own API among
        # them, live in context variables).
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(self._review, event), daemon=True,
                                  name="researchflow-plan-review")
        self.threads.append(thread)
        thread.start()

    def _review(self, event: Event) -> None:
        try:
            self._ask_and_resume(event)
        except Exception as exc:  # noqa: BLE001 - said; the run then waits for its timeout
            self.console.print(plain(f"the plan's review could not be asked here "
                                     f"({type(exc).__name__}: {exc}); the run waits for its "
                                     "timeout"))

    def _ask_and_resume(self, event: Event) -> None:
        edit, on_timeout = event.data
        run_id = event.detail
        if not _wait_paused(run_id, timeout=60):
            return
        with self._one_at_a_time:
            self.pause_display()
            try:
                answer = self.answer(event.topic, edit, on_timeout, event.total)
                _resume(run_id, answer, self.console)
            finally:
                self.resume_display()

    def answer(self, topic: str, edit: PlanEdit, on_timeout: str, timeout: int) -> PlanEdit:
        """The reviewer's answer, asked on the terminal."""
        questions = list(edit.subquestions)
        self.console.print(plain(f"\nThe plan for: {topic[:300]}", "bold"))
        self.console.print(plain(f"(without an answer in {timeout} s: {_then(on_timeout)})"))
        while True:
            self._show(questions)
            try:
                command = self.ask("plan> ").strip()
                if command in ("y", "yes", ""):
                    if questions:
                        return PlanEdit(approve=True, subquestions=questions)
                    self.console.print(plain("no sub-question left: add one, or n to cancel"))
                elif command in ("n", "no"):
                    return PlanEdit(approve=False, subquestions=questions)
                elif command.split()[0] in ("e", "d") and len(command.split()) == 2:
                    verb, number = command.split()
                    i = int(number) - 1
                    if not 0 <= i < len(questions):
                        raise ValueError(f"no sub-question {number}")
                    if verb == "d":
                        del questions[i]
                    else:
                        questions[i] = self._asked(questions[i])
                elif command == "a":
                    if len(questions) >= MAX_REVIEWED:
                        raise ValueError(f"at most {MAX_REVIEWED} sub-questions")
                    questions.append(self._asked(None))
                else:
                    self.console.print(plain(HELP))
            except EOFError:
                self.console.print(plain(f"no answer: {_then(on_timeout)}"))
                return PlanEdit(approve=on_timeout == "proceed", subquestions=edit.subquestions)
            except ValueError as exc:  # a bad number, a question too short
                self.console.print(plain(f"not taken: {' '.join(str(exc).split())[:300]}"))

    def _asked(self, current: PlannedQuestion | None) -> PlannedQuestion:
        hint = f" [{current.question}]" if current else ""
        question = self.ask(f"question{hint}: ").strip() or (current.question if current else "")
        if current is not None and current.searches:
            typed = self.ask(f"searches, separated by ';' [{'; '.join(current.searches)}] "
                             "(empty: keep them, '-': the question itself): ").strip()
            if not typed:
                return PlannedQuestion(question=question, searches=current.searches)
        else:
            typed = self.ask("searches, separated by ';' (empty: the question itself): ")
        searches = [] if typed.strip() == "-" else [s for s in typed.split(";") if s.strip()]
        return PlannedQuestion(question=question, searches=searches)

    def _show(self, questions: list[PlannedQuestion]) -> None:
        for n, q in enumerate(questions, start=1):
            self.console.print(plain(f"  {n}. {q.question}"))
            for s in q.searches:
                self.console.print(plain(f"       search: {s}", "dim"))
        self.console.print(plain(HELP, "dim"))


def _then(on_timeout: str) -> str:
    return "the plan is researched as planned" if on_timeout == "proceed" else \
        "the topic is cancelled"


class UiNotice:
    """With a Prefect server: say where the paused run's form is."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: Event) -> None:
        if event.kind != "plan_review":
            return
        from prefect.settings import PREFECT_UI_URL

        base = PREFECT_UI_URL.value() or "the Prefect UI"
        self.console.print(plain(f"the plan of {event.topic[:80]} waits for review: "
                                 f"{base}/runs/flow-run/{event.detail} (Resume)"), soft_wrap=True)


def _wait_paused(run_id: str, timeout: float) -> bool:
    """Whether the run is paused with its form saved (only then can it be resumed)."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(run_id)
            keys = run.state.state_details.run_input_keyset if run.state is not None else None
            if run.state is not None and run.state.is_paused() and keys:
                try:
                    if client.read_flow_run_input(run.id, keys["schema"]):
                        return True
                except Exception:  # noqa: BLE001 - not saved yet (404): ask again
                    pass
            elif run.state is not None and run.state.is_final():
                return False
            time.sleep(0.2)
    return False


def _resume(run_id: str, answer: PlanEdit, console: Console) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        result = client.resume_flow_run(run_id, run_input=answer.model_dump())
    if result.status.value != "ACCEPT":  # e.g. the review timed out meanwhile
        reason = getattr(result.details, "reason", "") or result.status.value
        console.print(plain(f"the run could not take the answer: {reason}"))


@contextmanager
def plan_reviews(console: Console, live: Any, *, terminal: bool) -> Iterator[None]:
    """For the block: answer plan reviews on the terminal (`terminal`: no Prefect server) or
    point at the UI, with the live progress display `live` stopped while asking."""
    from flows.progress import subscribe

    listener = (TerminalReview(console, pause_display=live.progress.stop,
                               resume_display=live.progress.start) if terminal
                else UiNotice(console))
    unsubscribe = subscribe(listener)
    try:
        yield
    finally:
        unsubscribe()
