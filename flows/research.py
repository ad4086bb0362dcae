"""One topic: plan → research each sub-question → compress → write report → store.

Parameters are plain values so the flow can be run (or rerun) from the Prefect UI with
overrides; keys come from the environment of the worker, never from parameters.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, unmapped
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.futures import as_completed
from prefect.runtime import flow_run
from prefect.task_runners import ThreadPoolTaskRunner

from core.models import ResearchResult, Topic
from core.report import report_id_for
from core.settings import RunConfig, Settings, run_config
from flows.progress import emit
from tasks.research import plan_topic, research
from tasks.store import store_result
from tasks.write import compress, write_report


def run_topic(topic: Topic, config: RunConfig) -> str:
    """The pipeline for one topic, inside a running flow. Returns the stored report id."""
    emit("topic_started", topic.text)
    progress = create_progress_artifact(0.0, description=f"Researching: {topic.text[:80]}")
    plan = plan_topic(topic, config)
    emit("topic_planned", topic.text, total=len(plan.subquestions))

    researched = research.map(plan.subquestions, config=unmapped(config),
                              max_rounds=unmapped(topic.max_rounds))
    compressed = []
    for done, future in enumerate(as_completed(researched), start=1):
        compressed.append(compress.submit(future, config))
        update_progress_artifact(progress, 80.0 * done / len(plan.subquestions),
                                 description=f"{done}/{len(plan.subquestions)} sub-questions read")
        emit("subquestion_done", topic.text)
    # Raises if any researcher failed: a topic never "completes" on partial evidence silently.
    findings = sorted((f.result() for f in compressed), key=lambda f: f.subquestion_index)
    transcripts = [f.result() for f in researched]

    report = write_report(plan, findings, config, report_id_for(topic.batch_id, topic.topic_id))
    sources = {s.url: s for t in transcripts for s in t.sources}
    result = ResearchResult(topic=topic, plan=plan, sources=tuple(sources.values()),
                            findings=tuple(findings), report=report)
    report_id = store_result(result, config.db_path, str(flow_run.id or "local"), report.engine)
    update_progress_artifact(progress, 100.0, description=f"Report {report_id} stored")
    create_markdown_artifact(report.markdown, key=f"report-{report_id.replace('_', '-')}",
                             description=f"Report for: {topic.text[:200]}")
    emit("topic_done", topic.text, detail=report_id)
    return report_id


@flow(name="research-topic", flow_run_name="topic: {topic:.60}",
      task_runner=ThreadPoolTaskRunner(max_workers=4))
def research_topic(topic: str, batch_id: str = "adhoc", max_subquestions: int = 4,
                   max_rounds: int = 2, model: str | None = None, search: str | None = None,
                   corpus_dir: str | None = None, db_path: str | None = None) -> str:
    """Research one topic and store its report in DuckDB; returns the report id."""
    settings = Settings.load(model=model, search=search,
                             corpus_dir=Path(corpus_dir) if corpus_dir else None,
                             db_path=Path(db_path) if db_path else None)
    item = Topic(text=topic, batch_id=batch_id, max_subquestions=max_subquestions,
                 max_rounds=max_rounds)
    return run_topic(item, run_config(settings))


def topic_flow(workers: int | None = None):
    """research_topic with its sub-question pool sized from settings
    (RESEARCHFLOW_MAX_SUBQUESTION_WORKERS) unless `workers` is given."""
    size = workers or Settings.load().max_subquestion_workers
    return research_topic.with_options(task_runner=ThreadPoolTaskRunner(max_workers=size))
