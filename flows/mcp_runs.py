"""Topics started for an MCP client, and what became of them.

    runs = TopicRuns(settings, deployment="research-topic/adhoc-served", external_api=True)
    started = runs.start("...", TopicOptions())          # RunInfo: run id, how, status
    runs.status(started.run_id)                          # RunInfo: status, report id when done

How a topic runs:

- `deployment`: when a Prefect API was configured (PREFECT_API_URL) and the deployment exists
  there (`researchflow serve` creates `research-topic/adhoc-served`, deployments/prefect.yaml
  `research-topic/adhoc-pool`), the topic is a run of it, created with `run_deployment(...,
  timeout=0)` and carried out by whatever serves the deployment; the run id is Prefect's;
- `detached`: otherwise a process of its own (flows.mcp_worker) researches it, in a session of
  its own so that it outlives this server and its client. The run id is ours, a UUID; the run's
  record, `<cache>/mcp-runs/<run_id>.json`, is written here before the process starts and by
  that process after, so any later server finds the run by its id. Starting one needs no
  Prefect API here: the call returns at once. At most `mcp_max_queued` detached topics are
  under way at once (their records say so, whichever server started them); one more is refused
  with `Busy` ("busy ... try later"), not queued: twelve calls at the largest options were all
  accepted and all ran before.

The parameters are the topic's options plus this server's model, search, corpus and store, so
the report lands in the store the server reads. A report id is deterministic
(core.reports.report.report_id_for), so `status` names it once the run has completed, wherever
it ran.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from core.models import Topic, TopicOptions
from core.reports.report import report_id_for
from core.settings import Settings

log = logging.getLogger("researchflow.mcp")

BATCH_ID = "adhoc"  # as `researchflow run`: the same topic from either is one report
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
STARTING_GRACE_S = 60  # a record with no worker pid after this long: the worker never started


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    status: str  # Prefect's state type: SCHEDULED, PENDING, RUNNING, COMPLETED, FAILED, ...
    how: str  # "deployment" or "detached"
    topic: str
    report_id: str | None = None  # once COMPLETED and stored
    message: str | None = None  # the state's message (a failed topic's one line)


class RunNotFound(LookupError):
    pass


class Busy(RuntimeError):
    """As many topics as `mcp_max_queued` are under way: a new one is refused, not queued."""


def runs_dir(settings: Settings) -> Path:
    """Where detached runs are recorded: `<cache>/mcp-runs`."""
    return Path(settings.cache_dir).expanduser() / "mcp-runs"


def read_record(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Whole or not at all: a reader never sees half a record."""
    spare = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    spare.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    spare.replace(path)


class TopicRuns:
    def __init__(self, settings: Settings, *, deployment: str | None, external_api: bool,
                 store_has: Any = None) -> None:
        self.settings = settings
        self.deployment = deployment
        self.external_api = external_api
        self._store_has = store_has or (lambda report_id: True)
        self._records = runs_dir(settings)
        self._workers: dict[str, subprocess.Popen] = {}  # reaped when polled

    # ---- starting ---------------------------------------------------------------------------

    def start(self, topic: str, options: TopicOptions) -> RunInfo:
        Topic.of(topic, options)  # the flow's own checks, up front
        parameters = self._parameters(topic, options)
        if self.external_api and self.deployment and self._deployment_exists():
            from prefect.deployments import run_deployment

            run = run_deployment(self.deployment, parameters=parameters, timeout=0,
                                 as_subflow=False)
            return self._info(run, "deployment")
        return self._detach(parameters)

    def _parameters(self, topic: str, options: TopicOptions) -> dict[str, Any]:
        s = self.settings
        target = s.store_target()
        if not target.startswith("ducklake:"):
            target = str(Path(target).resolve())  # the worker's own folder may differ
        parameters: dict[str, Any] = {"topic": topic, "options": options.model_dump(),
                                      "batch_id": BATCH_ID, "db_path": target}
        for name, value in (("model", s.model if s.model != "auto" else None),
                            ("search", s.search if s.search != "auto" else None),
                            ("corpus_dir", str(s.corpus_dir.resolve()) if s.corpus_dir
                             else None),
                            ("fallback", s.fallback)):  # a Retry keeps this server's policy
            if value is not None:
                parameters[name] = value
        return parameters

    def _deployment_exists(self) -> bool:
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        try:
            with get_client(sync_client=True) as client:
                client.read_deployment_by_name(self.deployment)
            return True
        except ObjectNotFound:
            log.warning("no deployment %s on the Prefect API: running topics in a process "
                        "of their own", self.deployment)
            return False

    def _detach(self, parameters: dict[str, Any]) -> RunInfo:
        under_way = self.under_way(parameters["topic"], parameters["db_path"])
        if under_way is not None:  # a second run would only write the same report again
            return under_way
        cap = self.settings.mcp_max_queued
        if self.count_under_way() >= cap:
            raise Busy(f"busy: {cap} topics are already under way here (running or waiting, "
                       "RESEARCHFLOW_MCP_MAX_QUEUED); try later, or poll run_status for one "
                       "of them")
        run_id = str(uuid.uuid4())
        self._records.mkdir(parents=True, exist_ok=True)
        path = self._records / f"{run_id}.json"
        output = self._records / f"{run_id}.log"
        write_record(path, {"run_id": run_id, "topic": parameters["topic"], "how": "detached",
                            "status": "PENDING", "parameters": parameters,
                            "created_at": datetime.now(timezone.utc).isoformat(),
                            "created": time.time(), "log": str(output)})
        with open(output, "ab") as out:
            # A session of its own: the client's ending of our process group misses it.
            self._workers[run_id] = subprocess.Popen(
                [sys.executable, "-m", "flows.mcp_worker", str(path)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, env=dict(os.environ))
        return self._detached(read_record(path))

    # ---- reading ----------------------------------------------------------------------------

    def under_way(self, topic: str, store: str) -> RunInfo | None:
        """The detached run of this topic into this store still researching, started by any
        server, if any."""
        if not self._records.is_dir():
            return None
        for path in sorted(self._records.glob("*.json"), key=lambda p: p.stat().st_mtime,
                           reverse=True):
            try:
                record = read_record(path)
            except (OSError, ValueError):
                continue
            if record.get("topic") != topic or record.get("status") in FINAL \
                    or (record.get("parameters") or {}).get("db_path") != store:
                continue
            info = self._detached(record)
            if info.status not in FINAL:
                return RunInfo(run_id=info.run_id, status=info.status, how=info.how,
                               topic=topic, message="already under way: this is its run")
        return None

    def count_under_way(self) -> int:
        """Detached runs still researching or waiting for a slot, started by any server that
        shares this cache (a crashed one no longer counts)."""
        if not self._records.is_dir():
            return 0
        count = 0
        for path in self._records.glob("*.json"):
            try:
                record = read_record(path)
            except (OSError, ValueError):
                continue
            if record.get("status") not in FINAL and self._detached(record).status not in FINAL:
                count += 1
        return count

    def status(self, run_id: str) -> RunInfo:
        try:
            key = str(uuid.UUID(run_id.strip()))
        except (ValueError, AttributeError):
            raise RunNotFound(f"{run_id!r} is not a run id (a UUID that research_topic "
                              "returned)") from None
        path = self._records / f"{key}.json"
        if path.is_file():
            return self._detached(read_record(path))
        if not self.external_api:
            raise RunNotFound(f"no run {key}: research_topic never returned it here (runs "
                              "of a deployment are found through PREFECT_API_URL)")
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        try:
            with get_client(sync_client=True) as client:
                run = client.read_flow_run(uuid.UUID(key))
        except ObjectNotFound:
            raise RunNotFound(f"no flow run {key} on the Prefect API") from None
        return self._info(run, "deployment")

    def _detached(self, record: dict[str, Any]) -> RunInfo:
        status, message = record["status"], record.get("message")
        if status not in FINAL and not self._alive(record):
            status = "CRASHED"
            message = f"the research process ended without a result; its output: " \
                      f"{record.get('log')}"
        elif status == "RUNNING" and record.get("flow_run_id") and self.external_api:
            status, message = self._prefect_state(record["flow_run_id"], status, message)
        if status == "PAUSED":  # review_plan: the form is the UI's, on the run's page
            message = "the plan waits for review: Resume on the run's page in the Prefect UI"
        report_id = record.get("report_id")
        if status == "COMPLETED":
            report_id = report_id or self._report_id(record["topic"], BATCH_ID)
            report_id = report_id if self._store_has(report_id) else None
        return RunInfo(run_id=record["run_id"], status=status, how="detached",
                       topic=record["topic"], report_id=report_id, message=message)

    def _alive(self, record: dict[str, Any]) -> bool:
        from flows.local_api import _started

        worker = self._workers.get(record["run_id"])
        if worker is not None and worker.poll() is not None:  # ours, and ended (reaped now)
            return False
        pid = record.get("pid")
        if pid is None:  # written by the worker once it runs
            return time.time() - float(record.get("created", 0)) < STARTING_GRACE_S
        return _started(int(pid)) == record.get("pid_started")

    @staticmethod
    def _prefect_state(flow_run_id: str, status: str, message: str | None
                       ) -> tuple[str, str | None]:
        """A detached run's Prefect state (PAUSED for a review) when the API is one we share."""
        from prefect.client.orchestration import get_client

        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(uuid.UUID(flow_run_id)).state
        except Exception:  # noqa: BLE001 - the record's word stands when the API is away
            return status, message
        if state is None or state.type.value in FINAL:  # the worker's record says how it ended
            return status, message
        return state.type.value, state.message or message

    @staticmethod
    def _report_id(topic: str, batch: str) -> str:
        return report_id_for(batch, Topic(text=topic, batch_id=batch).topic_id)

    def _info(self, run, how: str) -> RunInfo:
        state = run.state
        status = state.type.value if state is not None else "PENDING"
        params = run.parameters or {}
        topic = str(params.get("topic", ""))
        report_id = None
        message = (state.message or None) if state is not None else None
        if status == "PAUSED":
            message = "the plan waits for review: Resume on the run's page in the Prefect UI"
        if status == "COMPLETED" and topic:
            candidate = self._report_id(topic, str(params.get("batch_id") or BATCH_ID))
            report_id = candidate if self._store_has(candidate) else None
        return RunInfo(run_id=str(run.id), status=status, how=how, topic=topic,
                       report_id=report_id, message=message)

    def close(self) -> None:
        """Nothing to stop: detached runs go on without this server."""
        for worker in self._workers.values():
            worker.poll()
