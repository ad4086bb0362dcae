"""A CSV of topics: one research-topic subflow per good row, a few at a time.

Bad rows and failed topics are recorded, never fatal to the others. The batch ends with a table
artifact of what succeeded, failed or was skipped (with each topic's calls, tokens and cost), and
the flow itself fails (loudly, after every topic has had its turn) when anything did not succeed,
so the Prefect UI shows it and a retry of the batch reruns only what is missing: finished work is
served from the task cache. `max_batch_cost_usd` caps the whole batch: once it is reached, the
topics not yet started are recorded as skipped (reason: budget) and the batch still ends with its
table.

Every run belongs to an edition (core.reports.editions): by default the date the run was scheduled
for, in `timezone`. Within one edition a rerun skips stored topics; a new edition researches
every topic again, reusing every call whose input did not change, and stores a new report.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.runtime import flow_run
from prefect.states import Failed, State
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
from prefect.transactions import CommitMode, transaction

from core.text.escaping import markdown_text
from core.topics.failures import BatchIncomplete, TopicFailed
from core.accounting.ledger import scoped
from core.models import TopicOptions
from core.reports.editions import edition_name
from core.topics.rows import RowError, TopicRow, read_topics_csv
from core.llm.siblings import cheaper
from core.settings import RunConfig, Settings, run_config
from core.signals import Signal
from core.store import StoreError
from core.accounting.usage import UsageTotals
from flows.progress import ProgressArtifact, emit
from flows.records import finish_run, record, start_run, usage
from flows.run_log import forward_store_logs
from flows.topic import research_topic
from flows.slots import batch_closed, batch_slots, creating_subflow
from tasks.caching import core_fingerprint
from tasks.contexts import context_for

log = logging.getLogger("researchflow.flows")


@dataclass(frozen=True)
class TopicOutcome:
    row: int
    topic: str
    status: str  # "succeeded" | "failed" | "skipped" | "invalid"
    report_id: str = ""
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    error: str = ""
    reused: bool = False  # its report was already stored: nothing ran
    edition: str = ""
    changed: str = ""  # since the previous edition: "3 changes", "no change"; "": first


@dataclass(frozen=True)
class BatchBudget:
    """The batch's cap: values only (the config is the topics' own, so its ledger is the one
    their calls are recorded in). It is a parameter of every topic's task, and a task's
    parameters travel in the run context that prefect-dask pickles with every research task it
    submits; whether a topic already ran into the cap stays in this process, in the batch's
    gate (flows.slots.batch_closed)."""

    limit: float | None
    config: RunConfig
    run_id: str

    def exhausted(self) -> bool:
        if self.limit is None:
            return False
        return (batch_closed(self.run_id)
                or context_for(self.config).ledger.spent(self.run_id) >= self.limit)

    def refusal(self) -> str:
        """Why a topic may not start now ("" when it may): asked when it gets its slot."""
        if not self.exhausted():
            return ""
        return f"budget: the batch budget of ${self.limit:.4f} was reached before it started"


@task(name="run-topic", task_run_name="row {row.row}: {row.topic.text:.50}", cache_policy=NO_CACHE)
def run_topic_row(row: TopicRow, overrides: dict, budget: BatchBudget) -> TopicOutcome | State:
    topic = row.topic
    store = context_for(budget.config).store
    if not overrides.get("refresh"):
        stored = _stored_report(store, topic.topic_id)
        if stored:
            emit("topic_done", topic.text, detail=stored)
            return TopicOutcome(row.row, topic.text, "succeeded", report_id=stored, reused=True,
                                edition=topic.edition, changed=_changed(store, stored))
    # The topic flow runs inside this task's transaction; committed eagerly, what its tasks
    # finished stays cached even when the topic fails, so a rerun or a retry of the batch pays
    # only for what had not finished (rolled back, every finished call would be paid again).
    # The flow waits for its slot (flows.slots) once it exists in the API.
    with transaction(commit_mode=CommitMode.EAGER), creating_subflow(budget.run_id):
        state = research_topic(topic=topic.text, options=topic.options,
                               batch_id=topic.batch_id, edition=topic.edition,
                               return_state=True, **overrides)
    used = usage(budget.config, budget.run_id, topic.topic_id)
    spent = dict(calls=used.calls, input_tokens=used.input_tokens,
                 output_tokens=used.output_tokens, cost_usd=round(used.cost_usd, 6))
    if state.is_completed():
        report_id = state.result()
        return TopicOutcome(row.row, topic.text, "succeeded", report_id=report_id,
                            edition=topic.edition, changed=_changed(store, report_id), **spent)
    if state.is_cancelled():  # the batch's gate refused it: the flow recorded it as skipped
        return TopicOutcome(row.row, topic.text, "skipped", error=state.message or "skipped")
    failure = state.result(raise_on_failure=False)  # at the batch's budget, it closed the gate
    error = str(failure) if isinstance(failure, BaseException) else (state.message or "failed")
    # The topic flow records its own failure; this covers a flow that crashed before it could.
    if not isinstance(failure, TopicFailed):
        record(store.record_failure, topic.batch_id, topic, error[:2000], budget.run_id)
        emit("topic_failed", topic.text, detail=error)
    # Failed, so the row is red in the batch's graph and task list, not only its subflow; its
    # outcome travels as the state's data to the batch's table.
    return Failed(message=error[:2000], data=TopicOutcome(row.row, topic.text, "failed",
                                                          error=error[:2000], **spent))


def _outcome(row: TopicRow, future, store, run_id: str) -> TopicOutcome:
    """How a row's task ended, whatever it did: a failed row's task is Failed and carries its
    outcome; one that raised (a bug: Prefect logged its traceback) is a failed row naming the
    error, so the batch goes on to its other rows and its table."""
    try:
        value = future.result(raise_on_failure=False)
    except Exception as exc:  # noqa: BLE001 - its result could not even be read
        value = exc
    if isinstance(value, TopicOutcome):
        return value
    error = (f"{type(value).__name__}: {value}" if isinstance(value, BaseException)
             else str(value or "failed"))[:2000]
    topic = row.topic
    if store is not None:
        record(store.record_failure, topic.batch_id, topic, error, run_id)
    emit("topic_failed", topic.text, detail=error)
    return TopicOutcome(row.row, topic.text, "failed", error=error)


def _changed(store, report_id: str) -> str:
    """What the batch's table says about a report against the previous edition."""
    try:
        count = store.change_count(report_id)
    except StoreError as exc:
        log.error("could not read what changed in %s: %s", report_id, exc)
        return ""
    if count is None:
        return ""
    return "no change" if count == 0 else f"{count} change{'s' if count != 1 else ''}"


def edition_of_run(timezone: str = "UTC") -> str:
    """The default edition: the date this run was scheduled for (a deployment's slot, else when
    it was created), in `timezone`."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    when = flow_run.scheduled_start_time or datetime.now(ZoneInfo("UTC"))
    return when.astimezone(ZoneInfo(timezone)).date().isoformat()


def _zone(name: str, logger) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        logger.warning("unknown time zone %r: the edition is the date in UTC", name)
        return "UTC"
    return name


def _stored_report(store, topic_id: str) -> str:
    """The report id of a topic whose latest attempt succeeded, else "" (run it)."""
    try:
        status = store.topic_status(topic_id)
    except StoreError as exc:
        log.error("could not tell whether the topic is already stored: %s", exc)
        return ""
    if status and status["status"] == "succeeded" and status["report_id"]:
        return status["report_id"]
    return ""


@flow(name="research-batch", flow_run_name="batch: {csv_path}")
def research_batch(csv_path: str, batch_id: str | None = None,
                   defaults: TopicOptions = TopicOptions(), model: str | None = None,
                   search: str | None = None, corpus_dir: str | None = None,
                   db_path: str | None = None, max_concurrency: int | None = None,
                   max_cost_usd: float | None = None,
                   max_batch_cost_usd: float | None = None, refresh: bool = False,
                   edition: str | None = None, timezone: str = "UTC",
                   fallback: Literal["extractive", "none"] | None = None
                   ) -> list[dict] | State:
    """Research every topic in a CSV (column `topic`; optional columns: the fields of
    TopicOptions). `defaults` are the options of rows that leave a column empty.

    The run is `edition` (default: the date it was scheduled for, in `timezone`). A topic
    whose report is already stored in this edition (its latest attempt succeeded) is not run
    again unless `refresh`, which researches every topic afresh instead of reusing cached
    calls. A new edition researches every topic again and keeps the earlier reports.
    `fallback` (None: RESEARCHFLOW_FALLBACK) is a parameter, as every option is, so a Retry of
    the run keeps its policy; the topics receive the batch's, resolved."""
    logger = get_run_logger()
    forward_store_logs()  # lake commit conflicts show in the run's log
    # Every task's cache key needs it; on a checkout's first run it is a 0.4 s parse, done here
    # while the batch reads its CSV and creates its first subflows instead of in a first task.
    threading.Thread(target=core_fingerprint, name="researchflow-code-key", daemon=True).start()
    settings = Settings.load(model=model, search=search, db_path=Path(db_path) if db_path else None,
                             corpus_dir=Path(corpus_dir) if corpus_dir else None,
                             max_cost_usd=max_cost_usd, max_batch_cost_usd=max_batch_cost_usd,
                             fallback=fallback)
    config = run_config(settings, cheaper=cheaper)
    batch = batch_id or Path(csv_path).stem
    edition = edition_name(edition, lambda: edition_of_run(_zone(timezone, logger)))
    logger.info("edition %s of batch %s", edition, batch)
    rows, errors = read_topics_csv(Path(csv_path), batch_id=batch, defaults=defaults,
                                   warn=logger.warning, edition=edition,
                                   max_rows=settings.max_csv_rows)
    run_id = str(flow_run.id or "local")
    if refresh:  # the topics' config (flows.topic): so the budget reads their ledger
        config = config.model_copy(update={"refresh": run_id})
    for err in errors[:SHOWN_INVALID]:
        logger.error("row %d is invalid: %s", err.row, err.message)
    if len(errors) > SHOWN_INVALID:
        logger.error("%d more invalid rows (the topics table has each, with its reason)",
                     len(errors) - SHOWN_INVALID)
    try:  # waits (bounded) for a store another process holds
        store = start_run(config, settings, run_id, batch)
    except (StoreError, Signal) as exc:
        # Nothing is researched (and paid for) that could not be stored, nor by an engine or a
        # search that cannot be built (a key missing); the table says why.
        outcomes = [_invalid(e) for e in errors] + [
            TopicOutcome(r.row, r.topic.text, "failed", error=f"not started: {exc}")
            for r in rows]
        return _close(batch, outcomes, None, run_id, config)

    # The model as given (None: auto), so a topic resolves its roles as the batch did: on auto,
    # condense goes to the cheaper sibling; the resolved name would pin every role to it.
    overrides = {"model": model, "search": config.search, "corpus_dir": config.corpus_dir,
                 "db_path": config.db_path, "max_cost_usd": settings.max_cost_usd,
                 "refresh": refresh, "fallback": config.fallback}
    budget = BatchBudget(settings.max_batch_cost_usd, config, run_id)
    slots = max_concurrency or settings.max_topic_concurrency
    outcomes = [_invalid(e) for e in errors]
    # Each bad row is a row of `topics` too, with its reason: written in bulk beside the good
    # rows' research, never before it (100,000 bad rows one write each kept a good row
    # waiting over 300 s).
    invalid = threading.Thread(target=_record_invalid, args=(store, batch, errors, run_id),
                               name="researchflow-invalid-rows", daemon=True)
    invalid.start()
    try:  # whatever goes wrong, the batch reaches its table and finishes its run
        progress = ProgressArtifact(markdown_text(
            f"Batch {batch}, edition {edition}: {len(rows)} topics" +
            (f", {len(errors)} invalid rows" if errors else "")),
            key=f"batch-progress-{_slug(batch)}")
        _run_rows(batch, rows, overrides, budget, slots, store, outcomes, progress, len(errors))
        progress.update(100.0, _tally(outcomes))
    except Exception as exc:  # noqa: BLE001 - a bug: the rows it left still get their line
        logger.exception("the batch stopped early: rows not finished are failed")
        ended = {o.row for o in outcomes}
        outcomes += [TopicOutcome(r.row, r.topic.text, "failed",
                                  error=f"not finished: {type(exc).__name__}: {exc}"[:2000])
                     for r in rows if r.row not in ended]
    invalid.join()
    return _close(batch, outcomes, store, run_id, config)


SHOWN_INVALID = 20  # bad rows logged one by one; the rest are counted (the table has each)


def _record_invalid(store, batch: str, errors: list[RowError], run_id: str) -> None:
    """The bad rows into `topics`, in bulk (a write that fails is logged, never raised)."""
    if errors:
        record(store.record_invalid_many, batch,
               [(e.topic_id(batch), e.topic, e.message[:2000]) for e in errors], run_id)


def _run_rows(batch: str, rows: list[TopicRow], overrides: dict, budget: BatchBudget,
              slots: int, store, outcomes: list[TopicOutcome], progress: ProgressArtifact,
              invalid: int) -> None:
    """Every row's topic, a few at a time; each row's outcome appended as it ends."""
    total = len(rows) + invalid
    # Twice as many topic threads as slots: a topic's bookkeeping overlaps others' research.
    # Topic subflows beat no heartbeat: its thread sleeps in 1 s steps and a flow waits for it
    # to notice the end, ~1 s per topic; the batch flow's own heartbeat is already running.
    with scoped(run_id=budget.run_id, batch_id=batch, max_batch_cost_usd=budget.limit), \
            temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}), \
            batch_slots(budget.run_id, slots, budget.refusal), \
            ThreadPoolTaskRunner(max_workers=2 * slots) as runner:
        futures = [runner.submit(run_topic_row, parameters={
            "row": r, "overrides": overrides, "budget": budget}) for r in rows]
        for done, (row, future) in enumerate(zip(rows, futures), start=1):
            outcomes.append(_outcome(row, future, store, budget.run_id))
            if done < len(rows):
                progress.update(100.0 * (done + invalid) / total,
                                f"{done}/{len(rows)} topics finished")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(o: TopicOutcome, changes: bool) -> dict:
    """One row of the batch's table artifact, narrow enough for the UI at 1,600 px (it hid
    cost and error behind the whole topic): who, how it ended and what it cost first, long
    text clipped (the store and `researchflow show` have it whole; calls and tokens are in
    the usage artifact), text escaped, since Prefect renders cells as markdown."""
    row = {"row": o.row, "status": o.status, "topic": markdown_text(_clip(o.topic, 36)),
           "cost_usd": round(o.cost_usd, 6), "error": markdown_text(_clip(o.error, 40)),
           "report_id": o.report_id}
    if changes:
        row["changed"] = markdown_text(o.changed)
    return row


def _tally(outcomes: list[TopicOutcome]) -> str:
    """The batch's last word in its progress artifact: every row, and how each ended."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    ended = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    bad = len(outcomes) - counts.get("succeeded", 0)
    return (f"{len(outcomes)} rows done: {ended}" +
            (f"; the batch fails: {bad} rows have no report" if bad else ""))


def _close(batch: str, outcomes: list[TopicOutcome], store, run_id: str,
           config: RunConfig) -> list[dict] | State:
    """The batch's table and usage artifacts, always, and its run finished in the store; then
    the flow fails if a row did not succeed."""
    outcomes.sort(key=lambda o: o.row)
    table = [asdict(o) for o in outcomes]
    bad = [o for o in outcomes if o.status != "succeeded"]
    try:
        _artifacts(batch, outcomes, store, run_id, config)
    except Exception:  # noqa: BLE001 - the rows are stored; the run must still be finished
        log.exception("the batch's table could not be written")
    finally:
        if store is not None:
            finish_run(store, run_id, failed=bool(bad))
    if bad:
        failure = BatchIncomplete(f"{len(bad)} of {len(outcomes)} rows did not produce a "
                                  "report: " + "; ".join(f"row {o.row}: {o.error}"
                                                         for o in bad)[:4000])
        # Expected: each row's failure is in the table and was logged where it happened. The
        # run ends Failed with this one line as its message, not a traceback.
        return Failed(message=str(failure), data=failure)
    return table


def _artifacts(batch: str, outcomes: list[TopicOutcome], store, run_id: str,
               config: RunConfig) -> None:
    total = usage(config, run_id) if store is not None else UsageTotals()
    changes = any(o.changed for o in outcomes)
    shown = [_shown(o, changes) for o in outcomes]
    create_table_artifact(shown, key=f"batch-{_slug(batch)}",
                          description=markdown_text(f"Batch {batch}: {total.line()}"))
    create_markdown_artifact(f"**Batch {markdown_text(batch)}**\n\n{markdown_text(total.line())}",
                             key=f"batch-usage-{_slug(batch)}",
                             description=markdown_text(f"Usage of batch {batch}"))


def _invalid(err: RowError) -> TopicOutcome:
    return TopicOutcome(err.row, err.topic, "invalid", error=err.message)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:60] or "batch"
