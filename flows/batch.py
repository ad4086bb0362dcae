"""A CSV of topics: one research-topic subflow per good row, a few at a time.

Bad rows and failed topics are recorded, never fatal to the others. The batch ends with a table
artifact of what succeeded and what failed, and the flow itself fails (loudly, after every topic
has had its turn) when anything did not succeed, so the Prefect UI shows it and a retry of the
batch reruns only what is missing: finished work is served from the task cache.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from core.batch import RowError, TopicRow, read_topics_csv
from core.settings import Settings, run_config
from core.store import ResultStore
from flows.progress import emit
from flows.research import topic_flow
from tasks.store import record_failure


@dataclass(frozen=True)
class TopicOutcome:
    row: int
    topic: str
    status: str  # "succeeded" | "failed" | "invalid"
    report_id: str = ""
    error: str = ""


class BatchIncomplete(RuntimeError):
    """Raised at the end of a batch in which some topics did not produce a report."""


@task(name="run-topic", task_run_name="row {row.row}: {row.topic.text:.50}")
def run_topic_row(row: TopicRow, overrides: dict, db_path: str, run_id: str) -> TopicOutcome:
    topic = row.topic
    state = topic_flow()(topic=topic.text, batch_id=topic.batch_id,
                         max_subquestions=topic.max_subquestions, max_rounds=topic.max_rounds,
                         return_state=True, **overrides)
    if state.is_completed():
        return TopicOutcome(row.row, topic.text, "succeeded", report_id=state.result())
    error = _failure_message(state)
    record_failure(db_path, topic, error, run_id)
    emit("topic_failed", topic.text, detail=error)
    return TopicOutcome(row.row, topic.text, "failed", error=error)


def _failure_message(state) -> str:
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001 - we want the topic's own error text
        return f"{type(exc).__name__}: {exc}"[:2000]
    return state.message or "failed"


@flow(name="research-batch", flow_run_name="batch: {csv_path}")
def research_batch(csv_path: str, batch_id: str | None = None, model: str | None = None,
                   search: str | None = None, corpus_dir: str | None = None,
                   db_path: str | None = None, max_concurrency: int | None = None) -> list[dict]:
    """Research every topic in a CSV (column `topic`; optional max_subquestions, max_rounds)."""
    logger = get_run_logger()
    settings = Settings.load(model=model, search=search, db_path=Path(db_path) if db_path else None,
                             corpus_dir=Path(corpus_dir) if corpus_dir else None)
    config = run_config(settings)
    batch = batch_id or Path(csv_path).stem
    rows, errors = read_topics_csv(Path(csv_path), batch_id=batch)
    run_id = str(flow_run.id or "local")
    store = ResultStore(Path(config.db_path))
    store.start_run(run_id, batch, engine=config.model, search_backend=config.search,
                    settings_public=settings.public_dict())
    for err in errors:
        logger.error("row %d skipped: %s", err.row, err.message)

    overrides = {"model": config.model, "search": config.search, "corpus_dir": config.corpus_dir,
                 "db_path": config.db_path}
    workers = max_concurrency or settings.max_topic_concurrency
    progress = create_progress_artifact(0.0, description=f"Batch {batch}: {len(rows)} topics")
    outcomes = [_invalid(e) for e in errors]
    with ThreadPoolTaskRunner(max_workers=workers) as runner:
        futures = [runner.submit(run_topic_row, parameters={
            "row": r, "overrides": overrides, "db_path": config.db_path, "run_id": run_id})
            for r in rows]
        for done, future in enumerate(futures, start=1):
            outcomes.append(future.result())
            update_progress_artifact(progress, 100.0 * done / max(len(rows), 1),
                                     description=f"{done}/{len(rows)} topics finished")

    outcomes.sort(key=lambda o: o.row)
    table = [asdict(o) for o in outcomes]
    create_table_artifact(table, key=f"batch-{_slug(batch)}", description=f"Batch {batch}")
    bad = [o for o in outcomes if o.status != "succeeded"]
    store.finish_run(run_id, "failed" if bad else "succeeded")
    if bad:
        raise BatchIncomplete(f"{len(bad)} of {len(outcomes)} rows did not produce a report: " +
                              "; ".join(f"row {o.row}: {o.error}" for o in bad)[:4000])
    return table


def _invalid(err: RowError) -> TopicOutcome:
    return TopicOutcome(err.row, "", "invalid", error=err.message)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:60] or "batch"
