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
