"""One topic an MCP client started, researched in a process of its own that outlives the server.

    python -m flows.mcp_worker <cache>/mcp-runs/<run_id>.json

A stdio client that exits ends its server (the SDK ends the server's process group), so a topic
researched inside the server was lost with it: nothing reached `topics` or `runs`. The server
writes the run's record (flows.mcp_runs: its id, topic and the flow's parameters) and starts
this module in a session of its own; from then on only this process writes the record: its pid,
RUNNING once it holds one of RESEARCHFLOW_MAX_TOPIC_CONCURRENCY slots (a lock file each, so
topics started by several servers share them), the Prefect flow-run id, and the final state
with the report id or the failure's one line. Any later server reads the record by run id.

The flow runs against PREFECT_API_URL when the server had one (the run shows in its UI), else
against a local API this process starts and owns (flows.local_api), ended with it.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def main(path: Path) -> int:
    from flows.console import prefect_env
    from flows.local_api import _started
    from flows.mcp_runs import read_record, write_record

    prefect_env()
    record = read_record(path)
    record.update(pid=os.getpid(), pid_started=_started(os.getpid()))
    write_record(path, record)
    try:
        with _slot(path.parent, _concurrency()):
            record.update(status="RUNNING")
            write_record(path, record)
            state = _research(path, record)
        record.update(status=state.type.value, message=state.message or None)
        if state.is_completed():
            result = state.result(raise_on_failure=False)
            record["report_id"] = result if isinstance(result, str) else None
    except BaseException as exc:  # the record says so, whatever ended the research
        record.update(status="CRASHED", message=f"{type(exc).__name__}: {exc}"[:500])
        write_record(path, record)
        raise
    write_record(path, record)
    return 0 if record["status"] == "COMPLETED" else 1


def _research(path: Path, record: dict):
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow

    from flows.local_api import ensure_api
    from flows.mcp_runs import write_record
    from flows.topic import research_topic as flow

    ensure_api()  # none when PREFECT_API_URL is set
    parameters = record["parameters"]
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(flow, name=f"topic: {parameters['topic'][:60]}",
                                     parameters=parameters, tags=["mcp"])
    record["flow_run_id"] = str(run.id)  # the store's runs.run_id; the run's page in a UI
    write_record(path, record)
    return run_flow(flow, flow_run=run, parameters=parameters, return_type="state")


def _concurrency() -> int:
    from core.settings import Settings

    return max(1, Settings.load().max_topic_concurrency)


@contextmanager
def _slot(folder: Path, slots: int) -> Iterator[None]:
    """One of `slots` lock files under `folder`, waited for (PENDING meanwhile); the kernel
    frees it when this process ends, however it ends."""
    while True:
        for n in range(slots):
            handle = open(folder / f"slot-{n}.lock", "a")  # noqa: SIM115 - held until done
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            try:
                yield
            finally:
                handle.close()
            return
        time.sleep(1.0)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
