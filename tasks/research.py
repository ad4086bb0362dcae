"""Plan a topic, research one sub-question, review a wave: thin Prefect wrappers around core.

The research task runs the core loop with `TaskSteps` whenever a step costs money (an LLM
provider or SerpAPI): every choice of pages to read, every condensing of a page, every choice of
follow-up queries and every rewrite of searches that found nothing readable is its own task run,
retried on its own and cached on its inputs plus the code (so a new edition reuses it when its
input did not change). A search and a page fetch run in-line, in the research task: within an
edition a repeat is served by the search and page caches and by the call memo
(core.accounting.memo), so their task runs (~8 ms of CPU each, 40% of a batch's) bought nothing;
only when one fails for a passing reason does it become a task run, retried by Prefect with backoff
and shown as such in the UI. A fault in one provider call therefore repeats only that call, and a
retry of the research task (or of the whole run, from the CLI or the UI) is served every call that
had succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from prefect import get_run_logger, task
from prefect.transactions import CommitMode, transaction

from core.accounting.ledger import acting_as, scoped
from core.models import (Finding, FollowUp, PageNotes, ResearchPlan, SearchResult, Source,
                         SubQuestion, Topic, Transcript)
from core.overflow.roles import plan_with_shrink, queries_with_shrink, review_with_shrink
from core.relevance.plan import with_parts
from core.relevance.subject import read_topic
from core.researcher import (DirectSteps, choose_pages, condense_page, fetch_page, offerable,
                             research_subquestion, rewrite_queries, unavailable)
from core.search.base import SearchBackend
from core.search.cache import checking_pages
from core.search.fetch_types import PageFault
from core.search.registry import vocabulary_of
from core.signals import RateLimited, Transient
from core.settings import RunConfig
from tasks.caching import CACHED, LASTING, PLANNING, RESEARCHING, keep_out_of_cache
from tasks.contexts import context_for
from tasks.retry import RETRYING


@task(name="plan-topic", task_run_name="plan: {topic.text:.60}", **RETRYING, **PLANNING)
def plan_topic(topic: Topic, config: RunConfig) -> ResearchPlan:
    """The engine's plan, tied to the topic's parts as code reads them (core.relevance): the
    gate before the report judges every engine's plan by the same parts."""
    logger = get_run_logger()
    context = context_for(config)
    planner = context.engine.for_role("plan")
    with acting_as("plan"):
        plan = plan_with_shrink(planner, topic, log=logger.info)
    if not plan.parts:  # a model's plan; the offline planner reads them itself
        vocabulary = vocabulary_of(context.search)
        plan = with_parts(plan, read_topic(topic.text, vocabulary, plan.language))
    logger.info("planned %d sub-questions (intent %s) for %d part(s)", len(plan.subquestions),
                plan.intent, len(plan.parts))
    return plan


@task(name="review-findings", task_run_name="review wave {wave}: {plan.topic:.50}", **RETRYING,
      **LASTING)
def review_findings(plan: ResearchPlan, findings: list[Finding], gaps: list[str], wave: int,
                    limit: int, config: RunConfig) -> list[FollowUp]:
    """The supervisor reads wave `wave`'s findings and asks follow-ups for what is open."""
    logger = get_run_logger()
    supervisor = context_for(config).engine.for_role("plan")
    with acting_as("review"):
        followups = review_with_shrink(supervisor, plan, findings, gaps, wave, limit,
                                       log=logger.info)
    for f in followups:
        logger.info("follow-up%s: %s (why: %s)",
                    f" to #{f.parent}" if f.parent is not None else "", f.question, f.why)
    return followups


@task(name="research-subquestion",
      task_run_name="research w{subquestion.wave} #{subquestion.number}", **RETRYING,
      **RESEARCHING)
def research(subquestion: SubQuestion, config: RunConfig, max_rounds: int,
             max_pages: int = 6, edition: str = "") -> Transcript:
    """One sub-question's rounds. Its cache key holds what its searches could read
    (tasks.caching.SOURCES_SEEN): over a corpus, the documents they hit and their contents, so
    a retry, a rerun or a new edition after a file changed reads again and one that changed
    nothing it reads is served; over the web, its edition, so each edition observes the world
    again. The steps that only think (choose, condense, next queries) are served from the cache
    when what they are shown did not change."""
    logger = get_run_logger()
    # Steps become task runs when they cost money; for the local extractive engine over a
    # corpus, Prefect's bookkeeping per step would only slow the run down.
    context = context_for(config)
    steps = (TaskSteps(config, context.search, edition) if config.billed
             else DirectSteps(context.engine, context.search))
    with scoped(subquestion_index=subquestion.index):
        transcript = research_subquestion(steps, subquestion, max_rounds=max_rounds,
                                          max_pages=max_pages,
                                          results_per_query=config.results_per_query,
                                          progress=logger.info)
    logger.info("read %d sources for: %s", len(transcript.sources), subquestion.question)
    if not transcript.sources:
        keep_out_of_cache()  # "no evidence" is never served from a cache
    return transcript


# -- the steps of a research round, one task run each ------------------------------------------

@task(name="search", task_run_name="search: {query:.60}", **RETRYING, **CACHED)
def search_query(query: str, k: int, config: RunConfig, edition: str = "") -> list[SearchResult]:
    with acting_as("search"):
        return context_for(config).search.search(query, k=k)


@task(name="choose-pages", task_run_name="choose #{transcript.subquestion.number}: "
      "{limit} of {candidates_count}", **RETRYING, **LASTING)
def choose_hits(transcript: Transcript, candidates: list[SearchResult], limit: int,
                candidates_count: int, config: RunConfig) -> list[int]:
    return choose_pages(context_for(config).engine, transcript, candidates, limit)


@task(name="fetch-page", task_run_name="fetch #{subquestion.number}: {hit.url:.80}", **RETRYING,
      **CACHED)
def read_hit(subquestion: SubQuestion, hit: SearchResult, config: RunConfig,
             edition: str = "") -> PageNotes:
    """Fetch the page, again in each edition (a page stored before is checked with a
    conditional request): notes without a summary, or why it cannot be read. Condensing is a
    step of its own (`condense_hit`), so an unchanged page is not condensed again."""
    with checking_pages(edition):
        return fetch_page(context_for(config).search, hit)


@task(name="condense-page", task_run_name="condense #{subquestion.number}: {url:.80}",
      **RETRYING, **LASTING)
def condense_hit(subquestion: SubQuestion, url: str, source: Source,
                 config: RunConfig) -> PageNotes:
    return condense_page(context_for(config).engine, subquestion, url, source)


@task(name="next-queries", task_run_name="queries #{transcript.subquestion.number} "
      "round {round_index}", **RETRYING, **LASTING)
def choose_queries(transcript: Transcript, round_index: int, config: RunConfig) -> list[str]:
    with acting_as("queries"):
        engine = context_for(config).engine.for_role("queries")
        return queries_with_shrink(engine, transcript, round_index, log=get_run_logger().info)


@task(name="rewrite-queries", task_run_name="rewrite #{subquestion.number}", **RETRYING,
      **LASTING)
def rewrite_searches(subquestion: SubQuestion, failed: list[str], seen: list[SearchResult],
                     config: RunConfig) -> list[str]:
    """More specific searches for those of a sub-question that found nothing readable."""
    queries = rewrite_queries(context_for(config).engine, subquestion, failed, seen)
    get_run_logger().info("searches %s found nothing readable; rewritten as %s", failed, queries)
    return queries


@dataclass(frozen=True)
class TaskSteps:
    """`core.researcher.ResearchSteps` as task runs, each committed as soon as it finishes
    (searches and fetches in-line unless they fail for a passing reason: see the module's
    docstring).

    A step runs inside the research task's transaction; without an eager commit its cached
    result would be rolled back when the research task fails, and the retry would pay again
    for every call that had succeeded (ARCHITECTURE.md, "Caching and reruns").
    """

    config: RunConfig
    backend: SearchBackend  # the config's, for the in-line searches and fetches
    edition: str = ""

    def search(self, query: str, k: int) -> list[SearchResult]:
        try:
            with acting_as("search"):
                results = self.backend.search(query, k=k)
        except (RateLimited, Transient):  # its retries are Prefect's, with backoff, in the UI
            with transaction(commit_mode=CommitMode.EAGER):
                results = search_query(query, k, self.config, self.edition)
        # Screened after the cache, with this run's allow-list: what the guard refuses without
        # a request is never offered to choose.
        return offerable(self.backend, results)

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]:
        with transaction(commit_mode=CommitMode.EAGER):
            return choose_hits(transcript, candidates, limit, len(candidates), self.config)

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes:
        try:
            with checking_pages(self.edition):
                fetched = fetch_page(self.backend, hit)
        except PageFault:  # a passing fault: read again as a task run Prefect retries
            try:
                with transaction(commit_mode=CommitMode.EAGER):
                    fetched = read_hit(subquestion, hit, self.config, self.edition)
            except PageFault as fault:  # retried by Prefect and still down: skipped in this run
                return unavailable(fault)
        if fetched.source is None:
            return fetched
        with transaction(commit_mode=CommitMode.EAGER):
            return condense_hit(subquestion, hit.url, fetched.source, self.config)

    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]:
        with transaction(commit_mode=CommitMode.EAGER):
            return choose_queries(transcript, round_index, self.config)

    def rewrite(self, subquestion: SubQuestion, failed: Sequence[str],
                seen: Sequence[SearchResult]) -> list[str]:
        with transaction(commit_mode=CommitMode.EAGER):
            return rewrite_searches(subquestion, list(failed), list(seen), self.config)
