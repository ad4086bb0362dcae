"""Plan review: a topic flow with `review_plan` pauses after planning until the plan is approved.

The flow run pauses with Prefect's `pause_flow_run(wait_for_input=...)`: the run shows as
*Paused* and the UI's *Resume* button opens a form made from `PlanReview` (core.topics.plan_edits's
`PlanEdit`), filled in with the plan, where sub-questions are edited, removed or added and the
plan approved (or not: the topic is cancelled). The same answer may come through the API
(`resume_flow_run(run_id, run_input={...})`), which is what `researchflow run` does for a run
without a Prefect server after asking on the terminal (flows.review_terminal).

The pause blocks in the flow's own process and polls the API, so it works for a topic subflow
of a batch as for a topic alone (Prefect refuses only *rescheduling* pauses in subflows);
everything the flow did before it stays in memory, and nothing needs to be reloaded from the
cache. A topic of a batch gives its slot back while it waits.

When nobody answers in `review_timeout` seconds the flow goes on with the plan as it is or is
cancelled (`review_on_timeout`). Prefect would fail a run whose pause expired, so the run is
set back to Running first. A retry of a reviewed run (`prefect flow-run retry`, the UI's
Retry) researches the answer its earlier attempt was given without pausing again; a retry of
one nobody answered asks again.
"""

from __future__ import annotations

from prefect import get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.input.actions import read_flow_run_input
from prefect.runtime import flow_run

from core.text.escaping import markdown_text
from core.models import ResearchPlan, Topic
from core.topics.plan_edits import PlanEdit, PlanRejected, edit_of, reviewed
from flows.progress import emit

POLL_SECONDS = 2  # how soon a resumed run notices (Prefect's default is 10 s)


def pause_key(count: int) -> str:
    """The pause of the run when its run count is `count`. Prefect forgets fired pauses when a
    run is retried but keeps each answer under its pause's key, so each pause needs its own;
    the count grows with every attempt and every resume, so no two pauses share one."""
    return f"plan-review-{count}"


def response_key(count: int) -> str:
    """Where Prefect keeps the answer given to that pause (a run input)."""
    return f"paused-{pause_key(count)}-response"


class PlanReview(PlanEdit, RunInput):
    """The form the Prefect UI shows a paused topic run: its plan, to edit and approve."""


def review_plan(plan: ResearchPlan, topic: Topic) -> ResearchPlan:
    """Pause the running flow until the plan is reviewed; the plan to research.

    Raises PlanRejected when the reviewer did not approve it, or nobody answered in time and
    the topic says to cancel."""
    logger = get_run_logger()
    first = edit_of(plan)
    form = PlanReview.with_initial_data(description=_description(plan, topic),
                                        **first.model_dump())
    run_id = str(flow_run.id)
    logger.info("waiting up to %d s for the plan's review (%d sub-questions): Resume in the "
                "Prefect UI shows it to edit and approve", topic.review_timeout,
                len(plan.subquestions))
    count = _run_count(run_id)
    earlier = _earlier_answer(count)
    if earlier is not None:  # a retry: the plan (cached) was reviewed by an earlier attempt
        logger.info("the plan was reviewed by an earlier attempt of this run: researching that "
                    "answer")
        return reviewed(plan, earlier)
    emit("plan_review", topic.text, total=topic.review_timeout, detail=run_id,
         data=(first, topic.review_on_timeout))
    try:
        answer = pause_flow_run(wait_for_input=form, timeout=topic.review_timeout,
                                poll_interval=POLL_SECONDS, key=pause_key(count))
    except FlowPauseTimeout:
        _running_again(run_id)
        return _unreviewed(plan, topic, f"nobody reviewed the plan in {topic.review_timeout} s")
    if read_flow_run_input(response_key(count)) is None:  # fired before, never answered
        return _unreviewed(plan, topic, "this run's plan review was not answered")
    edit = PlanEdit.model_validate(answer.model_dump(include=set(PlanEdit.model_fields)))
    result = reviewed(plan, edit)
    logger.info("plan reviewed: %d sub-questions to research", len(result.subquestions))
    return result


def _run_count(run_id: str) -> int:
    """The run's run count as the API keeps it (the engine's copy of the run keeps the count it
    was read with)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return max(1, client.read_flow_run(run_id).run_count)


def _earlier_answer(count: int) -> PlanEdit | None:
    """The newest answer an earlier pause of this run was given (a retry's), if any."""
    for earlier in range(count - 1, 0, -1):
        value = read_flow_run_input(response_key(earlier))
        if value is not None:
            return PlanEdit.model_validate(value)
    return None


def _unreviewed(plan: ResearchPlan, topic: Topic, why: str) -> ResearchPlan:
    if topic.review_on_timeout == "cancel":
        raise PlanRejected(f"{why}; the topic is cancelled (review_on_timeout=cancel)")
    get_run_logger().warning("%s; researching it as planned (review_on_timeout=proceed)", why)
    return plan


def _running_again(run_id: str) -> None:
    """Take the run out of its expired pause (Prefect only lets it fail from there)."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, Running(message="plan review timed out"), force=True)


def _description(plan: ResearchPlan, topic: Topic) -> str:
    """The form's heading (markdown, shown by the UI): what is reviewed and what happens."""
    then = ("it is researched as planned" if topic.review_on_timeout == "proceed"
            else "the topic is cancelled")
    lines = [f"**Review the research plan for:** {markdown_text(topic.text[:300])}", "",
             f"Brief: {markdown_text(plan.brief[:600])}", "",
             "Edit, remove or add sub-questions (each is researched on its own), then Submit. "
             "Untick *approve* to cancel the topic.",
             f"Without an answer in {topic.review_timeout} s {then}."]
    return "\n".join(lines)
