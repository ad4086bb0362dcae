"""The batch of bench/overhead.py without Prefect: the same core calls in plain Python threads.

`run_plain(...)` is `flows.batch.research_batch` without Prefect: the same core calls the task
bodies make (tasks/research.py, tasks/write.py, tasks/store.py), in a ThreadPoolExecutor of the
topic concurrency and, per topic, one of the sub-question workers that runs the researchers and
their compressions, as the flows' ThreadPoolTaskRunners do. Differences: no artifacts, no
progress events, no task-result persistence, no retries (none are needed: nothing fails), and
nothing of the error paths (a failed topic raises)."""

from __future__ import annotations

import contextvars
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path


def run_plain(csv_path: str, batch_id: str, model: str, search: str, db_path: str,
              topic_workers: int, subquestion_workers: int) -> list[str]:
    """flows.batch.research_batch's work in plain threads; the report ids (see module doc)."""
    from core.topics.rows import read_topics_csv
    from core.accounting.ledger import scoped
    from tasks import contexts
    from core.settings import Settings, run_config
    from core.store import ResultStore

    settings = Settings.load(model=model, search=search, db_path=Path(db_path))
    config = run_config(settings)
    rows, _ = read_topics_csv(Path(csv_path), batch_id=batch_id)
    run_id = uuid.uuid4().hex
    store = ResultStore(Path(config.db_path))
    store.start_run(run_id, batch_id, engine=config.model, search_backend=config.search,
                    settings_public=settings.public_dict())
    with scoped(run_id=run_id, batch_id=batch_id, max_batch_cost_usd=None), \
            ThreadPoolExecutor(topic_workers) as pool:
        futures = [pool.submit(contextvars.copy_context().run, _topic, row.topic, config,
                               run_id, subquestion_workers) for row in rows]
        reports = []
        for future in futures:
            reports.append(future.result())
            contexts.flush()
            store.usage(run_id=run_id, topic_id=rows[len(reports) - 1].topic.topic_id)
    contexts.flush()
    store.usage(run_id=run_id)
    store.finish_run(run_id, "succeeded")
    return reports


def _topic(topic, config, run_id: str, workers: int) -> str:
    """flows.topic.research_topic / run_topic with the task bodies called in-line."""
    from core.accounting.ledger import acting_as, current_scope, scoped
    from core.models import ResearchResult
    from core.overflow.roles import plan_with_shrink, review_with_shrink
    from core.overflow.recovery import report_with_shrink
    from core.reports.report import assemble, report_id_for
    from tasks import contexts
    from core.store import ResultStore
    from core.topics.waves import MAX_FOLLOWUPS, affordable_followups, for_report, gaps

    context = contexts.context_for(config)
    engine = context.engine
    with scoped(topic_id=topic.topic_id, max_topic_cost_usd=None), \
            ThreadPoolExecutor(workers) as pool:
        with acting_as("plan"):
            plan = plan_with_shrink(engine.for_role("plan"), topic)
        findings, transcripts = _wave(pool, plan.subquestions, topic, config)
        for number in range(2, topic.max_waves + 1):
            scope = current_scope()
            limit = affordable_followups(MAX_FOLLOWUPS, spent=context.ledger.spent(
                scope.run_id, scope.topic_id), cap=None, researched=len(plan.subquestions))
            with acting_as("review"):
                followups = review_with_shrink(engine.for_role("plan"), plan, findings,
                                               gaps(plan, findings), number - 1, limit)
            if not followups:
                break
            plan = plan.with_followups(followups, number)
            more, read = _wave(pool, plan.subquestions[-len(followups):], topic, config)
            findings, transcripts = findings + more, transcripts + read
        writer = engine.for_role("report")
        with acting_as("report"):
            draft, kept = report_with_shrink(writer, plan, for_report(plan, findings),
                                             window=writer.context_window(),
                                             max_output_tokens=config.max_output_tokens)
        report = assemble(plan, kept, draft,
                          report_id=report_id_for(topic.batch_id, topic.topic_id),
                          engine=engine.name, notice=engine.notice_for(plan.language))
        sources = {s.url: s for t in transcripts for s in t.sources}
        result = ResearchResult(topic=topic, plan=plan, sources=tuple(sources.values()),
                                findings=tuple(findings), report=report)
        store = ResultStore(Path(config.db_path))
        report_id = store.save_result(result, run_id=run_id, engine=report.engine)
        contexts.flush()
        store.usage(run_id=run_id, topic_id=topic.topic_id)
        return report_id


def _wave(pool, subquestions, topic, config):
    """Wave.research: researchers in the pool, each compressed as soon as it finishes."""
    researching = {pool.submit(contextvars.copy_context().run, _research, sq, topic, config): sq
                   for sq in subquestions}
    compressing, transcripts = [], []
    for future in as_completed(researching):
        transcript = future.result()
        transcripts.append(transcript)
        compressing.append(pool.submit(contextvars.copy_context().run, _compress, transcript,
                                       config))
    findings = [f.result() for f in compressing]
    return sorted(findings, key=lambda f: f.subquestion_index), transcripts


def _research(sq, topic, config):
    from core.accounting.ledger import scoped
    from core.researcher import DirectSteps, research_subquestion
    from tasks import contexts

    # tasks.research.TaskSteps makes the same calls, each as a task run.
    context = contexts.context_for(config)
    steps = DirectSteps(context.engine, context.search)
    with scoped(subquestion_index=sq.index):
        return research_subquestion(steps, sq, max_rounds=topic.max_rounds,
                                    max_pages=topic.max_pages,
                                    results_per_query=config.results_per_query)


def _compress(transcript, config):
    from core.accounting.ledger import acting_as, scoped
    from core.overflow.recovery import compress_with_shrink
    from tasks import contexts

    compressor = contexts.context_for(config).engine.for_role("compress")
    with scoped(subquestion_index=transcript.subquestion.index), acting_as("compress"):
        return compress_with_shrink(compressor, transcript)
