"""Compress each researcher's transcript, then write the report: both shrink on overflow.

The shrink loop runs inside the task (core.recovery): a ContextOverflow is answered by a smaller
context on the next call, never by a Prefect retry; each attempt is logged with its sizes. When
shrinking runs out, the task fails with a message saying what to change.
"""

from __future__ import annotations

from typing import Sequence

from prefect import get_run_logger, task

from core.ledger import acting_as, scoped
from core.models import Finding, ResearchPlan, Report, Transcript
from core.recovery import compress_with_shrink, report_with_shrink
from core.report import assemble
from core.runtime import build_engine, context_limits
from core.settings import RunConfig
from tasks.caching import CACHED
from tasks.retry import RETRYING


@task(name="compress-findings", task_run_name="compress #{transcript.subquestion.index}",
      **RETRYING, **CACHED)
def compress(transcript: Transcript, config: RunConfig) -> Finding:
    with scoped(subquestion_index=transcript.subquestion.index), acting_as("compress"):
        return compress_with_shrink(build_engine(config), transcript, log=get_run_logger().info)


@task(name="write-report", task_run_name="report: {plan.topic:.60}", **RETRYING, **CACHED)
def write_report(plan: ResearchPlan, findings: Sequence[Finding], config: RunConfig,
                 report_id: str) -> Report:
    engine = build_engine(config)
    model = getattr(getattr(engine, "model", None), "model", None)  # None: offline engine
    window = context_limits(config).window(model) if model else None
    with acting_as("report"):
        draft, kept = report_with_shrink(
            engine, plan, list(findings), window=window,
            max_output_tokens=config.max_output_tokens, log=get_run_logger().info)
    return assemble(plan, kept, draft, report_id=report_id, engine=engine.name,
                    notice=getattr(engine, "notice", None))
