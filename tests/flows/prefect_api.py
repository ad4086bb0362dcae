"""Reading what a run left in the Prefect API (what the UI shows), for flow tests."""

from __future__ import annotations

import asyncio


def _ask(read):
    """`await read(client)` with a fresh client of the configured API."""
    from prefect.client.orchestration import get_client

    async def run():
        async with get_client() as client:
            return await read(client)

    return asyncio.run(run())


def artifacts(flow_run_id) -> list:
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    return _ask(lambda client: client.read_artifacts(artifact_filter=ArtifactFilter(
        flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))))


def subflow_runs(flow_run_id) -> list:
    """The flow runs started inside `flow_run_id` (a batch's topics)."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    return _ask(lambda client: client.read_flow_runs(flow_run_filter=FlowRunFilter(
        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id]))))


FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def task_runs(flow_run_id, *, timeout: float = 60.0, quiet: float = 1.5) -> list:
    """The task runs of a finished flow run, once the API shows all of them settled.

    A task run's states reach the server as events, which it records in batches (up to a
    second later: flows/local_api.py SERVER_SETTINGS), not as API calls. Right after a flow
    returns, the API can still show a task Pending or Running, with an earlier run_count, or
    not at all. So this waits until the flow run and every task run read final and nothing
    has changed for `quiet` seconds, longer than the server takes to write a batch.
    """
    import time

    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async def read(client):
        flow_run = await client.read_flow_run(flow_run_id)
        runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
        return flow_run, runs

    deadline = time.monotonic() + timeout
    seen, since = None, time.monotonic()
    while True:
        flow_run, runs = _ask(read)
        view = sorted((str(r.id), _type(r), r.state_name, r.run_count) for r in runs)
        settled = _type(flow_run) in FINAL and all(_type(r) in FINAL for r in runs)
        if view != seen:
            seen, since = view, time.monotonic()
        elif settled and time.monotonic() - since >= quiet:
            return runs
        if time.monotonic() > deadline:
            raise AssertionError(f"the runs of flow run {flow_run_id} did not settle in "
                                 f"{timeout:.0f} s: {view}")
        time.sleep(0.25)


def _type(run) -> str | None:
    return run.state.type.value if run.state else None
