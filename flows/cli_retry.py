"""`researchflow retry RUN_ID`: retry a run that `researchflow run` or `batch` started.

Such runs have no deployment, so the Prefect UI shows them no Retry button and a plain
`prefect flow-run retry ID` asks for an entrypoint. This command names it (the flow's own file
in this checkout) and retries the same flow run in this process, against the server in
PREFECT_API_URL: every task that finished is served from the result cache, so only what failed
calls a provider again. Run it with the environment of the first run (keys, PREFECT_HOME).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import typer

from flows.console import fail, out, plain

FLOWS = Path(__file__).resolve().parent
ENTRYPOINTS = {"research-batch": f"{FLOWS / 'batch.py'}:research_batch",
               "research-topic": f"{FLOWS / 'topic.py'}:research_topic"}


def retry(run_id: str = typer.Argument(..., help="The flow run's id (a UUID: the end of its "
                                       "URL in the UI).")) -> None:
    """Retry a failed run of `researchflow run` or `batch` as the same flow run, reusing
    every call that finished (needs PREFECT_API_URL: the server the run was recorded on)."""
    try:
        uuid.UUID(run_id)
    except ValueError:
        fail(f"{run_id!r} is not a flow run id (a UUID such as "
             "0f6c5f5e-0d0b-4b7e-9a57-2a1d3c0e9f11)")
    from prefect.settings import PREFECT_API_URL

    if not (os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()):
        fail("no Prefect server (PREFECT_API_URL is not set): a run on the throwaway API of a "
             "command that ended cannot be retried; run the same command again instead (it "
             "reuses every finished call)")
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(uuid.UUID(run_id))
            flow = client.read_flow(run.flow_id)
    except ObjectNotFound:
        fail(f"no flow run {run_id} on {PREFECT_API_URL.value() or 'the server'}")
    if run.deployment_id is not None:
        fail(f"flow run {run_id} belongs to a deployment: retry it from the UI or with "
             f"`prefect flow-run retry {run_id}`")
    entrypoint = ENTRYPOINTS.get(flow.name)
    if entrypoint is None:
        fail(f"flow run {run_id} is a run of {flow.name!r}, not of researchflow's flows")
    out.print(plain(f"retrying {flow.name} run {run_id} ({run.state_name or 'unknown state'})"))
    prefect = Path(sys.executable).parent / "prefect"
    done = subprocess.run([str(prefect), "flow-run", "retry", run_id, "--entrypoint",
                           entrypoint], stdin=subprocess.DEVNULL)
    raise typer.Exit(done.returncode)
