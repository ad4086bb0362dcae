"""Compress each researcher's transcript, then write the report: both shrink on overflow.

The shrink loop runs inside the task (core.recovery): a ContextOverflow is answered by a smaller
context on the next call, never by a Prefect retry; each attempt is logged with its sizes. When
shrinking runs out, the task fails with a message saying what to change.
"""

from __future__ import annotations

from typing import Sequence

from prefect import get_run_logger, task

from core.models import Finding, ResearchPlan, Report, Transcript
from core.recovery import compress_with_shrink, report_with_shrink
from core.report import assemble
from core.runtime import build_engine, context_limits
from core.settings import RunConfig
from tasks.caching import CACHE_EXPIRATION, CACHE_POLICY
from tasks.retry import RETRIES, RETRY_DELAYS, RETRY_JITTER, retry_on_signal

_retrying = dict(retries=RETRIES, retry_delay_seconds=RETRY_DELAYS, retry_jitter_factor=RETRY_JITTER,
                 retry_condition_fn=retry_on_signal, cache_policy=CACHE_POLICY,
                 cache_expiration=CACHE_EXPIRATION, persist_result=True)


@task(name="compress-findings", task_run_name="compress #{transcript.subquestion.index}",
      **_retrying)
def compress(transcript: Transcript, config: RunConfig) -> Finding:
    return compress_with_shrink(build_engine(config), transcript, log=get_run_logger().info)


@task(name="write-report", task_run_name="report: {plan.topic:.60}", **_retrying)
def write_report(plan: ResearchPlan, findings: Sequence[Finding], config: RunConfig,
                 report_id: str) -> Report:
    engine = build_engine(config)
    model = getattr(getattr(engine, "model", None), "model", None)  # None: offline engine
    window = context_limits(config).window(model) if model else None
    draft, kept = report_with_shrink(
        engine, plan, list(findings), window=window,
        max_output_tokens=config.max_output_tokens, log=get_run_logger().info)
    return assemble(plan, kept, draft, report_id=report_id, engine=engine.name,
                    notice=getattr(engine, "notice", None))
