"""Plan a topic and research one sub-question: thin Prefect wrappers around core."""

from __future__ import annotations

from prefect import get_run_logger, task

from core.models import ResearchPlan, SubQuestion, Topic, Transcript
from core.research import research_subquestion
from core.runtime import build_engine, build_search
from core.settings import RunConfig
from tasks.caching import CACHE_EXPIRATION, CACHE_POLICY
from tasks.retry import RETRIES, RETRY_DELAYS, RETRY_JITTER, retry_on_signal

_retrying = dict(retries=RETRIES, retry_delay_seconds=RETRY_DELAYS, retry_jitter_factor=RETRY_JITTER,
                 retry_condition_fn=retry_on_signal, cache_policy=CACHE_POLICY,
                 cache_expiration=CACHE_EXPIRATION, persist_result=True)


@task(name="plan-topic", task_run_name="plan: {topic.text:.60}", **_retrying)
def plan_topic(topic: Topic, config: RunConfig) -> ResearchPlan:
    plan = build_engine(config).plan(topic)
    get_run_logger().info("planned %d sub-questions (intent %s)", len(plan.subquestions), plan.intent)
    return plan


@task(name="research-subquestion", task_run_name="research #{subquestion.index}", **_retrying)
def research(subquestion: SubQuestion, config: RunConfig, max_rounds: int) -> Transcript:
    logger = get_run_logger()
    transcript = research_subquestion(build_engine(config), build_search(config), subquestion,
                                      max_rounds=max_rounds,
                                      results_per_query=config.results_per_query,
                                      progress=logger.info)
    logger.info("read %d sources for: %s", len(transcript.sources), subquestion.question)
    return transcript
