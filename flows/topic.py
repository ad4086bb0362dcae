"""One topic: plan → research each sub-question → compress → write report → store.

Parameters are plain values so the flow can be run (or rerun) from the Prefect UI with
overrides; keys come from the environment of the worker, never from parameters. Every provider
call made for the topic is recorded in the usage ledger under the run, batch and topic set here
(core.accounting.ledger scope); `max_cost_usd` caps what the topic may spend in this run.

A failed topic is recorded in DuckDB (status, error, run) whether it ran alone or in a batch,
and the flow fails with `TopicFailed`: one line naming the step, the signal and what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger, unmapped
from prefect.artifacts import create_markdown_artifact
from prefect.states import Cancelled, Failed, State
from prefect.futures import as_completed
from prefect.runtime import flow_run

from core.text.escaping import markdown_text
from core.text.ui_markdown import tables_as_lists
from core.topics.failures import NoEvidence, StepFailure, TopicFailed
from core.accounting.ledger import current_scope, scoped
from core.models import (FollowUp, Finding, ResearchPlan, ResearchResult, Topic, TopicOptions,
                         Transcript)
from core.reports.editions import EditionDiff, compare, section, snapshot_of, with_section
from core.reports.report import fixed_heading, report_id_for
from core.llm.siblings import cheaper
from core.settings import RunConfig, Settings, run_config
from core.topics.waves import MAX_FOLLOWUPS, affordable_followups, gaps
from core.topics.plan_edits import PlanRejected
from core.relevance.gate import judge, passed, refused
from flows.plan_review import review_plan
from flows.progress import ProgressArtifact, emit
from flows.records import finish_run, record, start_run, usage_line
from flows.run_log import forward_store_logs
from flows.runners import SettingsTaskRunner
from flows.slots import (TopicSkipped, close_batch, slot_released, subflow_started,
                         topic_slot)
from tasks.research import plan_topic, research, review_findings
from tasks.store import store_result
from tasks.contexts import context_for
from tasks.write import compress, note_fallback, quote_extractively, write_report

# Errors that already say how the topic ended: a step lets them through unwrapped.
_ENDINGS = (TopicFailed, TopicSkipped, PlanRejected)


def _step(step: str, call, *args):
    """Run a call; any failure becomes TopicFailed naming the step."""
    try:
        return call(*args)
    except _ENDINGS:
        raise
    except Exception as exc:  # noqa: BLE001 - the topic's error must name its root cause
        raise TopicFailed([StepFailure(step, exc)]) from exc


def _after_store(what: str, call, *args) -> None:
    """Run a call made once the report is stored: the topic succeeded, so a failure here is
    logged (with its traceback: nothing expected fails here) and the topic goes on."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001 - a stored report is not a failed topic
        get_run_logger().exception("the report is stored, but its %s failed", what)


def run_topic(topic: Topic, config: RunConfig, run_id: str) -> str:
    """The pipeline for one topic, inside a running flow. Returns the stored report id.

    In a batch, the topic holds one of its slots (flows.slots) from planning until the report
    is written: storing and the artifacts need no provider, so the next topic starts meanwhile.
    Raises TopicSkipped when the batch's budget was reached before a slot was free."""
    # Prefect's UI renders artifacts and their descriptions as markdown: a topic goes in as
    # escaped text (core.text.escaping), so "[x](javascript:...)" stays those characters.
    progress = ProgressArtifact(markdown_text(f"Researching: {topic.text[:80]}"),
                                key=f"progress-{topic.topic_id}")
    subflow_started()  # its first writes are done: the next topic's subflow may be created
    with topic_slot(run_id):
        emit("topic_started", topic.text)
        try:
            result = _research(topic, config, progress)
        except TopicFailed as failure:
            if failure.budget_scope == "batch":  # before the slot goes to the next topic
                close_batch(run_id)
            raise
    result, diff = _step("compare", _what_changed, result, config)
    report_id = _step("store", store_result, result, config, run_id, result.report.engine, diff)
    if diff is not None and diff.changes:
        _after_store("event", _changed_event, topic, diff)
    _after_store("artifacts", _stored_artifacts, topic, result.report.markdown, report_id,
                 config, run_id, progress)
    emit("topic_done", topic.text, detail=report_id)
    return report_id


def _stored_artifacts(topic: Topic, markdown: str, report_id: str, config: RunConfig,
                      run_id: str, progress: ProgressArtifact) -> None:
    usage = usage_line(config, run_id, topic.topic_id)
    progress.update(100.0, f"Report {report_id} stored")
    _report_artifact(topic, markdown, report_id, usage)


def _what_changed(result: ResearchResult, config: RunConfig
                  ) -> tuple[ResearchResult, EditionDiff | None]:
    """From a topic's second edition on: the comparison with the previous edition, and the
    report with its "What changed" section. Made in code from the store; no provider call."""
    topic = result.topic
    previous = context_for(config).store.previous_edition(topic)
    if previous is None:
        return result, None
    diff = compare(previous, snapshot_of(result, topic.edition))
    report = result.report
    markdown = with_section(report.markdown, section(diff, report.language),
                            fixed_heading("references", report.language))
    get_run_logger().info("%d change(s) since edition %s", len(diff.changes), previous.edition)
    return result.model_copy(update={"report": report.model_copy(
        update={"markdown": markdown})}), diff


def _changed_event(topic: Topic, diff: EditionDiff) -> None:
    """`researchflow.topic.changed`, for a Prefect Automation to notify on."""
    from prefect.events import emit_event

    emit_event(event="researchflow.topic.changed",
               resource={"prefect.resource.id": f"researchflow.topic.{topic.topic_id}",
                         "prefect.resource.name": topic.text[:200]},
               payload={"topic": topic.text[:2000], "batch_id": topic.batch_id,
                        "edition": topic.edition, "report_id": diff.current.report_id,
                        "previous_report_id": diff.previous.report_id,
                        "previous_edition": diff.previous.edition,
                        "changes": len(diff.changes), "counts": diff.counts()})


def _research(topic: Topic, config: RunConfig, progress: ProgressArtifact) -> ResearchResult:
    """Plan, research in waves, write the report: every provider call of the topic."""
    plan = _step("plan", plan_topic, _to_plan(topic), config)
    if topic.review_plan:
        with slot_released():  # a person is not a provider: the next topic may research
            plan = _step("review", review_plan, plan, topic)
    emit("topic_planned", topic.text, total=len(plan.subquestions))
    wave = Wave(topic, config, progress)
    findings, transcripts = wave.research(plan.subquestions)
    for number in range(2, topic.max_waves + 1):
        # The supervisor reviews what the gate keeps: a section quoting off its subject is open.
        findings = list(judge(plan, findings).findings)
        followups = _review(plan, findings, number - 1, config)
        if not followups:
            break
        plan = plan.with_followups(followups, number)
        asked = plan.subquestions[-len(followups):]
        _wave_artifact(topic, number, asked)
        emit("topic_planned", topic.text, total=len(followups))
        more, read = wave.research(asked)
        findings, transcripts = findings + more, transcripts + read

    if refused(plan, judge(plan, findings)):
        # A weak model may quote nothing it read, nothing about the subject, or too little of
        # what was asked: the extractive engine quotes the same pages before the gate refuses.
        findings, transcripts = _quoted_instead(topic, plan, findings, transcripts, config,
                                                progress)
    # The gate: each part answered or not from evidence about its subject; none, no report.
    judged = _step("report", passed, plan, findings, config.search)
    report_id = report_id_for(topic.batch_id, topic.topic_id)
    report = _step("report", write_report, plan, list(judged.findings), config, report_id,
                   list(judged.headings))
    # The report task's cache ignores the id: an edition whose findings did not change reuses
    # the report written for them and gives it this edition's id.
    report = report.model_copy(update={"report_id": report_id})
    if not report.citations:  # nothing the writer cited: a failure with its reason
        raise TopicFailed([StepFailure("report", NoEvidence(topic.text, config.search))])
    if judged.unanswered:
        get_run_logger().warning("no evidence about the subject for: %s",
                                 "; ".join(judged.headings))
    # Per version: a sub-question served from an earlier run's cache may hold a page's older
    # text, which its quotes name (core.store.source_versions).
    sources = {(s.url, s.text): s for t in transcripts for s in t.sources}
    return ResearchResult(topic=topic, plan=plan, sources=tuple(sources.values()),
                          findings=tuple(findings), report=report)


def _quoted_instead(topic: Topic, plan: ResearchPlan, findings: list[Finding],
                    transcripts: list[Transcript], config: RunConfig,
                    progress: ProgressArtifact) -> tuple[list[Finding], list[Transcript]]:
    """The findings with the extractive engine's in place of the model's, for a topic the gate
    would otherwise refuse (the model's quotes answer no part): first from the pages the model
    read (a compress fallback each); when those hold nothing to quote (the model chose the wrong
    pages), from the extractive engine researching the same sub-questions itself (a research
    fallback).
    Unchanged with fallbacks off, on the offline engine, or when it finds nothing either;
    returned with the transcripts whose pages the report cites."""
    quoted = _step("compress", quote_extractively, plan, transcripts, config)
    if not quoted and config.fallback == "extractive" and config.model != "offline":
        offline = config.model_copy(update={"model": "offline", "role_models": ()})
        emit("topic_planned", topic.text, total=len(plan.subquestions))  # researched again
        researched, read = Wave(topic, offline, progress).research(plan.subquestions)
        quoted = [f for f in researched if f.support]
        if quoted:
            _step("research", note_fallback, "research",
                  "the model's pages held nothing to quote", config)
            transcripts = transcripts + read  # their pages are the report's sources
    by_index = {f.subquestion_index: f for f in quoted}
    return [by_index.get(f.subquestion_index, f) for f in findings], transcripts


def _to_plan(topic: Topic) -> Topic:
    """The topic as the planner sees it: neither its edition nor how its plan is reviewed is
    part of the plan (nor of its cache key), so a new edition, reviewed or not, reuses the
    same cached plan."""
    return topic.timeless().model_copy(update={k: TopicOptions.model_fields[k].default
                                    for k in ("review_plan", "review_timeout",
                                              "review_on_timeout")})


class Wave:
    """Researches sub-questions as one mapped wave of tasks, then compresses each transcript.

    Every researcher runs to its end even when one fails (what finished is cached for the
    rerun); any failure then fails the topic, naming each step: a topic never completes on
    partial evidence silently.
    """

    def __init__(self, topic: Topic, config: RunConfig, progress: ProgressArtifact) -> None:
        self.topic, self.config, self.progress = topic, config, progress
        self.done = 0
        self.total = 0

    def research(self, subquestions) -> tuple[list[Finding], list[Transcript]]:
        self.total += len(subquestions)
        researched = research.map(subquestions, config=unmapped(self.config),
                                  max_rounds=unmapped(self.topic.max_rounds),
                                  max_pages=unmapped(self.topic.max_pages),
                                  edition=unmapped(self.topic.edition))
        index = {f.task_run_id: sq.number for f, sq in zip(researched, subquestions)}
        failures: list[StepFailure] = []
        transcripts: list[Transcript] = []
        compressing = []
        for future in as_completed(researched):
            i = index[future.task_run_id]
            try:
                transcript = future.result()
            except Exception as exc:  # noqa: BLE001 - collected, reported below
                failures.append(StepFailure(f"research #{i}", exc))
            else:
                transcripts.append(transcript)
                compressing.append((i, compress.submit(transcript, self.config)))
            self.done += 1
            self.progress.update(80.0 * self.done / self.total,
                                 f"{self.done}/{self.total} sub-questions read")
            emit("subquestion_done", self.topic.text)
        findings: list[Finding] = []
        for i, future in compressing:
            try:
                findings.append(future.result())
            except Exception as exc:  # noqa: BLE001 - collected, reported below
                failures.append(StepFailure(f"compress #{i}", exc))
        if failures:
            raise TopicFailed(sorted(failures, key=lambda f: _order(f.step)))
        return sorted(findings, key=lambda f: f.subquestion_index), transcripts


def _review(plan: ResearchPlan, findings: list[Finding], waves: int,
            config: RunConfig) -> list[FollowUp]:
    """The supervisor's follow-ups after `waves` waves, as many as the budget leaves room for."""
    scope = current_scope()
    ledger = context_for(config).ledger
    limit = affordable_followups(MAX_FOLLOWUPS, spent=ledger.spent(scope.run_id, scope.topic_id),
                                 cap=scope.max_topic_cost_usd,
                                 researched=len(plan.subquestions))
    if scope.max_batch_cost_usd is not None:
        limit = min(limit, affordable_followups(
            MAX_FOLLOWUPS, spent=ledger.spent(scope.run_id), cap=scope.max_batch_cost_usd,
            researched=len(plan.subquestions)))
    if limit == 0:
        get_run_logger().info("no wave %d: the budget leaves no room for follow-ups", waves + 1)
        return []
    return _step(f"review #{waves}", review_findings, plan, findings, gaps(plan, findings),
                 waves, limit, config)


def _report_artifact(topic: Topic, markdown: str, report_id: str, usage: str) -> None:
    # The UI clips wide tables: its copy of the report lists the comparison's rows instead.
    create_markdown_artifact(f"{tables_as_lists(markdown)}\n\n---\n{markdown_text(usage)}",
                             key=f"report-{report_id.replace('_', '-')}",
                             description=markdown_text(f"Report for: {topic.text[:200]} "
                                                       f"({usage})"))


def _wave_artifact(topic: Topic, number: int, asked) -> None:
    lines = [f"### Wave {number}: {len(asked)} follow-up(s) for: {markdown_text(topic.text[:120])}",
             "", "| # | follow-up | completes | why |", "|---|---|---|---|"]
    lines += [f"| {sq.number} | {markdown_text(sq.question)} | "
              f"{'#' + str(sq.parent + 1) if sq.parent is not None else 'new section'} | "
              f"{markdown_text(sq.why)} |" for sq in asked]
    create_markdown_artifact(tables_as_lists("\n".join(lines)), key=f"wave-{number}-{topic.topic_id}",
                             description=markdown_text(f"Wave {number} of: {topic.text[:150]}"))


def _order(step: str) -> tuple[int, int]:
    kind, _, n = step.partition(" #")
    return ({"research": 0, "compress": 1}.get(kind, 2), int(n or 0))


@flow(name="research-topic", flow_run_name="topic: {topic:.60}",
      task_runner=SettingsTaskRunner())
def research_topic(topic: str, options: TopicOptions = TopicOptions(), batch_id: str = "adhoc",
                   model: str | None = None, search: str | None = None,
                   corpus_dir: str | None = None, db_path: str | None = None,
                   max_cost_usd: float | None = None, refresh: bool = False,
                   edition: str = "",
                   fallback: Literal["extractive", "none"] | None = None) -> str | State:
    """Research one topic and store its report in DuckDB; returns the report id.

    `options` (core.models.TopicOptions) say how deep to research and how to write: waves,
    rounds and pages, the language (None: the topic's own), the report's length and whether
    the plan waits for a person's review (flows.plan_review: the run pauses). `refresh`
    makes every call again instead of reusing cached ones (a retry of the same run still
    reuses what that run finished). `edition` (a scheduled batch's run, e.g. its date) keeps
    a report per edition, the second and later ones saying what changed since the previous.
    `fallback` (None: RESEARCHFLOW_FALLBACK) is what answers a role a weak model cannot; a
    parameter, so a Retry or a deployment run of this flow run keeps the policy it started with.
    """
    forward_store_logs()  # lake commit conflicts show in the run's log
    settings = Settings.load(model=model, search=search, max_cost_usd=max_cost_usd,
                             corpus_dir=Path(corpus_dir) if corpus_dir else None,
                             db_path=Path(db_path) if db_path else None, fallback=fallback)
    config = run_config(settings, cheaper=cheaper)
    item = Topic.of(topic, options, batch_id, (edition or "").strip())
    own_id = str(flow_run.id or "local")
    run_id = str(flow_run.root_flow_run_id or own_id)  # a batch's run when inside a batch
    if refresh:
        config = config.model_copy(update={"refresh": run_id})
    alone = run_id == own_id
    store = (start_run(config, settings, run_id, batch_id) if alone
             else context_for(config).store)
    scope = dict(run_id=run_id, batch_id=batch_id, topic_id=item.topic_id,
                 max_topic_cost_usd=settings.max_cost_usd, edition=item.edition)
    if alone:
        scope["max_batch_cost_usd"] = None
    succeeded = False
    try:
        with scoped(**scope):
            report_id = run_topic(item, config, run_id)
        succeeded = True
        return report_id
    except (TopicSkipped, PlanRejected) as skipped:  # the run ends cancelled, not failed
        reason = str(skipped) if isinstance(skipped, TopicSkipped) else f"review: {skipped}"
        record(store.record_skipped, batch_id, item, reason, run_id)
        emit("topic_failed", item.text, detail=reason)
        return Cancelled(message=reason)
    except Exception as exc:  # noqa: BLE001 - a topic fails naming its step, whatever it was
        failure = exc if isinstance(exc, TopicFailed) else TopicFailed([StepFailure("topic", exc)])
        _failed(store, item, config, run_id, str(failure))
        if failure.expected:
            # Its one line is the run's message, logged once ("Finished in state Failed(...)")
            # and not as a traceback; the run still ends Failed, and can be retried.
            return Failed(message=str(failure), data=failure)
        if failure is exc:
            raise  # a bug: Prefect logs its traceback
        raise failure from exc
    finally:  # whatever ended the topic, its run is not left `running`
        if alone:
            finish_run(store, run_id, failed=not succeeded)


def _failed(store, item: Topic, config: RunConfig, run_id: str, error: str) -> None:
    """A failed topic in the store, the UI (an artifact with its usage) and the progress."""
    record(store.record_failure, item.batch_id, item, error[:2000], run_id)
    try:
        usage = usage_line(config, run_id, item.topic_id)
        create_markdown_artifact(f"**Failed**: {markdown_text(error)}\n\n"
                                 f"{markdown_text(usage)}",
                                 description=markdown_text(f"Failed: {item.text[:200]}"))
    except Exception:  # noqa: BLE001 - the topic's own error is the one to report
        get_run_logger().exception("could not write the failed topic's artifact")
    emit("topic_failed", item.text, detail=error)
