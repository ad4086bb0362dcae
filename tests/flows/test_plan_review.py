"""Plan review through the real Prefect engine and API (a test server, as the UI would use).

A topic flow with `review_plan` pauses after planning; the test does what the UI's form does:
reads the form (the run input's schema, filled in with the plan) and resumes the run through
the API with an edited plan. What was kept, dropped and added must be what was researched and
stored. A batch's topic is a subflow: it pauses the same way. A timeout goes on or cancels.
"""

from __future__ import annotations

import contextvars
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.models import TopicOptions
from core.store import query_readonly
from flows.topic import research_topic
from tests.flows.prefect_api import _ask

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

ADDED = "How does a lock protect shared data between threads?"


def _start(topic: str, corpus: Path, db: Path, **options) -> tuple[threading.Thread, dict]:
    """Run the topic flow in a thread, as a CLI or a worker would; its final state lands in
    the returned dict."""
    out: dict = {}

    def go() -> None:
        out["state"] = research_topic(
            topic=topic, model="offline", search="corpus", corpus_dir=str(corpus),
            db_path=str(db), return_state=True,
            options=TopicOptions(max_subquestions=3, max_rounds=1, max_waves=1, **options))

    # With this thread's context: Prefect's settings (the session's server) live in it.
    thread = threading.Thread(target=contextvars.copy_context().run, args=(go,), daemon=True)
    thread.start()
    return thread, out


def _paused(topic: str, timeout: float = 120):
    """The flow run of `topic` once it is paused with its form saved (what the UI waits for)."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterState, \
        FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = _ask(lambda c: c.read_flow_runs(flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])))))
        for run in runs:
            keys = run.state.state_details.run_input_keyset
            if run.parameters.get("topic") == topic and keys:
                try:
                    form = _ask(lambda c: c.read_flow_run_input(run.id, keys["schema"]))
                except Exception:  # noqa: BLE001 - paused, its form not saved yet (404)
                    form = None
                if form:
                    return run, form
        time.sleep(0.3)
    raise AssertionError(f"no paused run of {topic!r} within {timeout} s")


def _planned(form: dict) -> list[dict]:
    import json

    schema = json.loads(form) if isinstance(form, str) else form
    return schema["properties"]["subquestions"]["default"]


def _resume(run_id, answer: dict) -> None:
    result = _ask(lambda c: c.resume_flow_run(run_id, run_input=answer))
    assert result.status.value == "ACCEPT", result.details


def _stored_questions(db: Path) -> list[str]:
    _, rows = query_readonly(db, "SELECT question FROM subquestions ORDER BY idx")
    return [r[0] for r in rows]


def test_an_edited_plan_is_researched_as_edited(corpus: Path, db_path: Path) -> None:
    topic = "How do threads share memory in Python, and how many run at a time?"
    thread, out = _start(topic, corpus, db_path, review_plan=True, review_timeout=300)
    run, form = _paused(topic)
    planned = _planned(form)
    assert len(planned) >= 2 and all(p["question"] and p["searches"] for p in planned)
    kept = planned[0]
    edited = {"question": "Why does the global interpreter lock let one thread run at a time?",
              "searches": ["global interpreter lock one thread bytecode"]}
    # The first kept as planned, the second edited, the rest dropped, one added (no searches).
    _resume(run.id, {"approve": True, "subquestions": [kept, edited, {"question": ADDED}]})
    thread.join(240)
    state = out["state"]
    assert state.is_completed(), state.message

    assert _stored_questions(db_path) == [kept["question"], edited["question"], ADDED]
    _, queries = query_readonly(db_path, "SELECT idx, queries FROM subquestions ORDER BY idx")
    assert list(queries[0][1]) == kept["searches"]
    assert list(queries[1][1]) == edited["searches"]
    assert list(queries[2][1]) == [ADDED]  # no searches given: the question itself
    # The added question was researched: its finding quotes the page about locks, verbatim.
    _, found = query_readonly(db_path, "SELECT subquestion, evidence FROM findings "
                                       "WHERE subquestion_index = 2 AND claim_index >= 0")
    assert found and all(r[0] == ADDED for r in found)
    assert any("lock protects shared data" in r[1] for r in found), found
    _, report = query_readonly(db_path, "SELECT markdown FROM reports")
    for question in (kept["question"], edited["question"], ADDED):
        assert question.rstrip("?") in report[0][0] or question in report[0][0]


def test_the_form_shows_the_questions_own_parts(corpus: Path, db_path: Path) -> None:
    """A reviewer once saw "Makes SQLite", searched as "sqlite makes SQLite"."""
    topic = "Should I use threads or processes for waiting on sockets?"
    thread, out = _start(topic, corpus, db_path, review_plan=True, review_timeout=300)
    run, form = _paused(topic)
    assert [(p["question"], p["searches"]) for p in _planned(form)] == [
        ("threads for waiting on sockets", ["threads waiting sockets", "threads"]),
        ("processes for waiting on sockets", ["processes waiting sockets", "processes"]),
        ("How do threads and processes differ for waiting on sockets?",
         ["threads processes waiting sockets", "threads processes"])]
    _resume(run.id, {"approve": False, "subquestions": _planned(form)})
    thread.join(120)


def test_a_topic_of_a_batch_pauses_as_a_subflow(corpus: Path, db_path: Path,
                                                tmp_path: Path) -> None:
    from flows.batch import research_batch

    topic = "How do processes share data in Python?"
    csv = tmp_path / "topics.csv"
    csv.write_text("topic,review_plan,max_subquestions,max_rounds,max_waves\n"
                   f"{topic},true,2,1,1\n", encoding="utf-8")
    out: dict = {}
    def go() -> None:
        out["state"] = research_batch(
            csv_path=str(csv), model="offline", search="corpus", corpus_dir=str(corpus),
            db_path=str(db_path), return_state=True)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(go,), daemon=True)
    thread.start()
    run, form = _paused(topic)
    assert run.parent_task_run_id is not None  # a subflow, paused in its batch's process
    _resume(run.id, {"approve": True, "subquestions": [{"question": ADDED}]})
    thread.join(240)
    assert out["state"].is_completed(), out["state"].message
    assert _stored_questions(db_path) == [ADDED]


def test_a_plan_not_approved_cancels_the_topic(corpus: Path, db_path: Path) -> None:
    topic = "How does asyncio cancel a coroutine?"
    thread, out = _start(topic, corpus, db_path, review_plan=True)
    run, form = _paused(topic)
    _resume(run.id, {"approve": False, "subquestions": _planned(form)})
    thread.join(120)
    state = out["state"]
    assert state.is_cancelled(), state
    _, rows = query_readonly(db_path, "SELECT status, error FROM topics")
    assert rows == [("skipped", "review: the plan was not approved")]
    _, reports = query_readonly(db_path, "SELECT count(*) FROM reports")
    assert reports == [(0,)]


@pytest.mark.parametrize("on_timeout", ["proceed", "cancel"])
def test_a_review_timeout_goes_on_or_cancels(corpus: Path, db_path: Path, on_timeout) -> None:
    topic = {"proceed": "How does the asyncio event loop run coroutines, and what cancels them?",
             "cancel": "How does the asyncio event loop run coroutines?"}[on_timeout]
    thread, out = _start(topic, corpus, db_path, review_plan=True, review_timeout=10,
                         review_on_timeout=on_timeout)
    thread.join(180)
    state = out["state"]
    if on_timeout == "proceed":
        assert state.is_completed(), state.message
        assert len(_stored_questions(db_path)) == 2  # the plan as planned: the two parts
    else:
        assert state.is_cancelled(), state
        assert "nobody reviewed the plan in 10 s" in state.message


def _cli(tmp_path: Path, corpus: Path, topic: str, typed: str,
         shared_prefect) -> subprocess.CompletedProcess:
    """`researchflow run --review-plan` as a user runs it without a Prefect server, with
    `typed` at its prompt."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), RESEARCHFLOW_MODEL="offline")
    # The command's own API starts on a copy of the migrated database the run's shared server
    # made from nothing: ~7 s of CPU less than migrating it again.
    shared_prefect.seed(tmp_path / "prefect")
    return subprocess.run(
        [str(Path(sys.executable).parent / "researchflow"), "run", topic, "--review-plan",
         "--corpus", str(corpus), "--db", str(tmp_path / "cli.duckdb"), "--max-subquestions",
         "2", "--max-rounds", "1", "--max-waves", "1"],
        input=typed, capture_output=True, text=True, env=env, timeout=300)


def test_the_cli_without_a_server_asks_on_the_terminal(tmp_path: Path, corpus: Path,
                                                       shared_prefect) -> None:
    topic = "How do threads share memory?"
    done = _cli(tmp_path, corpus, topic, f"d 2\na\n{ADDED}\nlock shared data;threads lock\ny\n",
                shared_prefect)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The plan for: How do threads share memory?" in done.stdout
    assert "  2. " in done.stdout  # the plan was shown before sub-question 2 was dropped
    questions = _stored_questions(tmp_path / "cli.duckdb")
    assert len(questions) == 2 and questions[1] == ADDED, questions
    _, queries = query_readonly(tmp_path / "cli.duckdb",
                                "SELECT queries FROM subquestions WHERE idx = 1")
    assert list(queries[0][0]) == ["lock shared data", "threads lock"]


def test_the_cli_with_no_answer_does_what_the_timeout_says(tmp_path: Path, corpus: Path,
                                                           shared_prefect) -> None:
    done = _cli(tmp_path, corpus, "How do processes pass data?", "",  # stdin closed at once
                shared_prefect)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no answer: the topic is cancelled" in done.stdout
    assert "the topic was cancelled: review: the plan was not approved" in done.stderr
    _, rows = query_readonly(tmp_path / "cli.duckdb", "SELECT status FROM topics")
    assert rows == [("skipped",)]


def test_a_retry_of_a_reviewed_run_researches_its_answer_without_pausing(
        corpus: Path, db_path: Path) -> None:
    from prefect.flow_engine import run_flow
    from prefect.states import Scheduled

    topic = "How do queues pass data between processes?"
    thread, out = _start(topic, corpus, db_path, review_plan=True, review_timeout=300)
    run, _ = _paused(topic)
    _resume(run.id, {"approve": True, "subquestions": [{"question": ADDED}]})
    thread.join(240)
    assert out["state"].is_completed(), out["state"].message
    # What the UI's Retry does: the same run scheduled again and run by the engine (attempt
    # 2). Were it to pause, it would wait 300 s and be cancelled (review_on_timeout=cancel).
    _ask(lambda c: c.set_flow_run_state(run.id, Scheduled(), force=True))
    again = _ask(lambda c: c.read_flow_run(run.id))
    started = time.monotonic()
    state = run_flow(research_topic, flow_run=again, parameters=again.parameters,
                     return_type="state")
    assert state.is_completed(), state.message
    assert time.monotonic() - started < 200
    states = _ask(lambda c: c.read_flow_run_states(run.id))
    assert [st.type.value for st in states].count("PAUSED") == 1  # the first attempt's only
    assert _stored_questions(db_path) == [ADDED]
