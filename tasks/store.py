"""Persist a topic's result (or its failure) in DuckDB. Idempotent per (batch, topic)."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task

from core.models import ResearchResult, Topic
from core.store import ResultStore


@task(name="store-result", task_run_name="store: {result.topic.text:.60}", retries=2,
      retry_delay_seconds=2)
def store_result(result: ResearchResult, db_path: str, run_id: str, engine: str) -> str:
    report_id = ResultStore(Path(db_path)).save_result(result, run_id=run_id, engine=engine)
    get_run_logger().info("stored report %s in %s", report_id, db_path)
    return report_id


def record_failure(db_path: str, topic: Topic, error: str, run_id: str) -> None:
    """Plain function (not a task): called from the batch flow when a topic's flow failed."""
    ResultStore(Path(db_path)).record_failure(topic.batch_id, topic, error, run_id)
