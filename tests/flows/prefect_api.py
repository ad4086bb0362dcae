"""Reading what a run left in the Prefect API (what the UI shows), for flow tests."""

from __future__ import annotations

import asyncio


def artifacts(flow_run_id) -> list:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async def read():
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))

    return asyncio.run(read())


def subflow_runs(flow_run_id) -> list:
    """The flow runs started inside `flow_run_id` (a batch's topics)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    async def read():
        async with get_client() as client:
            return await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run_id])))

    return asyncio.run(read())
