"""Compress each researcher's transcript, then write the report: both shrink on overflow.

The shrink loop runs inside the task (core.overflow.recovery): a ContextOverflow is answered by a smaller
context on the next call, never by a Prefect retry; each attempt is logged with its sizes. When
shrinking runs out, the task fails with a message saying what to change.
"""

from __future__ import annotations

from typing import Sequence

from prefect import get_run_logger, task

from core.accounting.ledger import acting_as, current_scope, scoped
from core.models import Finding, ResearchPlan, Report, Transcript
from core.overflow.recovery import compress_with_shrink, report_with_shrink
from core.reports.report import assemble
from core.settings import RunConfig
from core.topics.waves import for_report
from tasks.caching import LASTING, cache_policy
from tasks.contexts import context_for
from tasks.retry import RETRYING


@task(name="compress-findings", task_run_name="compress #{transcript.subquestion.number}",
      **RETRYING, **LASTING)
def compress(transcript: Transcript, config: RunConfig) -> Finding:
    compressor = context_for(config).engine.for_role("compress")
    with scoped(subquestion_index=transcript.subquestion.index), acting_as("compress"):
        return compress_with_shrink(compressor, transcript, log=get_run_logger().info)


@task(name="quote-extractively", task_run_name="quote extractively: {plan.topic:.60}", **LASTING)
def quote_extractively(plan: ResearchPlan, transcripts: Sequence[Transcript],
                       config: RunConfig) -> list[Finding]:
    """Findings the extractive engine quotes from the pages read, for a topic whose model
    quoted none of them (core.engine.fallback, `quote_instead`): each one a compress fallback.
    Empty for the offline engine, with fallbacks off, or when it finds nothing either."""
    fallback = context_for(config).fallback
    found: list[Finding] = []
    for transcript in transcripts if fallback is not None else ():
        with scoped(subquestion_index=transcript.subquestion.index), acting_as("compress"):
            finding = fallback.quote_instead(transcript)
        if finding is not None:
            found.append(finding)
    if found:
        get_run_logger().warning("the model quoted none of the pages read: the extractive "
                                 "engine quoted %d section(s) for it", len(found))
    return found


@task(name="note-fallback", task_run_name="fallback: {role}")
def note_fallback(role: str, why: str, config: RunConfig) -> None:
    """Records that the extractive engine answered `role` for the model (core.engine.fallback):
    in the ledger, the flow-run log, the report's header and the CLI's closing line."""
    fallback = context_for(config).fallback
    if fallback is not None:
        fallback.answered_for(role, why)


@task(name="write-report", task_run_name="report: {plan.topic:.60}", **RETRYING,
      **{**LASTING, "cache_policy": cache_policy(ignore=("report_id",))})
def write_report(plan: ResearchPlan, findings: Sequence[Finding], config: RunConfig,
                 report_id: str, unanswered: Sequence[str] = ()) -> Report:
    """The report on the findings the gate kept; `unanswered` names the parts it found no
    evidence for (core.relevance.gate). Its cache ignores `report_id`: the flow stamps its own
    id on a report reused for unchanged findings (a new edition of an unchanged topic)."""
    context = context_for(config)
    engine = context.engine
    writer = engine.for_role("report")
    sections = for_report(plan, findings)  # follow-ups join the sections they complete
    with acting_as("report"):
        draft, kept = report_with_shrink(
            writer, plan, sections, window=writer.context_window(),
            max_output_tokens=config.max_output_tokens, log=get_run_logger().info)
    return assemble(plan, kept, draft, report_id=report_id, engine=engine.name,
                    notice=engine.notice_for(plan.language),
                    fallbacks=context.fallback_roles(current_scope().topic_id),
                    unanswered=tuple(unanswered))
