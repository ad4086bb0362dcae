"""Persist a topic's result in DuckDB. Idempotent per (batch, topic); failures are recorded by
the topic flow itself (flows.topic)."""

from __future__ import annotations

from prefect import get_run_logger, task

from core.reports.editions import EditionDiff
from core.models import ResearchResult
from core.settings import RunConfig
from tasks.contexts import context_for


@task(name="store-result", task_run_name="store: {result.topic.text:.60}", retries=2,
      retry_delay_seconds=2)
def store_result(result: ResearchResult, config: RunConfig, run_id: str, engine: str,
                 diff: EditionDiff | None = None) -> str:
    store = context_for(config).store
    report_id = store.save_result(result, run_id=run_id, engine=engine, diff=diff)
    get_run_logger().info("stored report %s in %s", report_id, config.db_path)
    return report_id

