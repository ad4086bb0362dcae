"""A DuckLake commit conflict, logged by core (which never imports Prefect), reaches the log of
the run that made the write: where a person looks."""

from __future__ import annotations

import logging

import pytest
from prefect import flow, task

from flows.run_log import forward_store_logs

pytestmark = pytest.mark.usefixtures("prefect_harness")

LINE = ("DuckLake commit conflicted with another writer (attempt 1 of 25); the transaction "
        "runs again in 0.01 s")


def test_lake_lines_reach_the_runs_log_and_nothing_outside_a_run(caplog):
    @task
    def write() -> None:
        logging.getLogger("researchflow.store.lake").info(LINE)

    @flow
    def writing() -> None:
        forward_store_logs()
        write()

    with caplog.at_level(logging.INFO):
        writing()
        logging.getLogger("researchflow.store.lake").info("outside any run")  # no error
    in_runs = [r for r in caplog.records if r.name.startswith("prefect.task_runs")]
    assert [r.getMessage() for r in in_runs if "DuckLake" in r.getMessage()] == [LINE]
    assert all(r.levelno == logging.INFO for r in in_runs if "DuckLake" in r.getMessage())
    forward_store_logs()  # idempotent: one handler, one forwarded line per record
    assert len([h for h in logging.getLogger("researchflow.store.lake").handlers
                if type(h).__name__ == "_ToRunLog"]) == 1


def test_a_completed_task_says_nothing_a_failed_one_still_does(caplog):
    """Half of a topic's log lines were "Finished in state Completed()"; the task list shows
    every state, and a failure still logs its line."""
    @task
    def fine() -> int:
        return 1

    @task
    def broken() -> None:
        raise ValueError("no")

    @flow
    def steps() -> None:
        forward_store_logs()
        fine()
        broken(return_state=True)

    with caplog.at_level(logging.INFO):
        steps()
    lines = [r.getMessage() for r in caplog.records if r.name == "prefect.task_runs"]
    assert "Finished in state Completed()" not in lines
    assert any(line.startswith("Finished in state Failed(") for line in lines), lines
