"""Topics started for an MCP client, as Prefect flow runs, and what became of them.

    runs = TopicRuns(settings, deployment="research-topic/adhoc-served", external_api=True)
    started = runs.start("...", TopicOptions())          # RunInfo: run id, how, status
    runs.status(started.run_id)                          # RunInfo: status, report id when done

How a topic runs:

- `deployment`: when a Prefect API was configured (PREFECT_API_URL) and the deployment exists
  there (`researchflow serve` creates `research-topic/adhoc-served`, deployments/prefect.yaml
  `research-topic/adhoc-pool`), the topic is a run of it, created with `run_deployment(...,
  timeout=0)` and carried out by whatever serves the deployment;
- `in-process`: otherwise the flow run is created here, against that API or, without one, the
  command's own local API (flows.local_api), and run in a worker thread of this process, at
  most RESEARCHFLOW_MAX_TOPIC_CONCURRENCY at once (later ones wait, Pending).

Either way the run id is Prefect's flow-run id, known at once, and the parameters are the
topic's options plus this server's model, search, corpus and store, so the report lands in the
store the server reads. A report id is deterministic (core.reports.report.report_id_for), so
`status` names it once the run has completed, wherever it ran.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from core.models import Topic, TopicOptions
from core.reports.report import report_id_for
from core.settings import Settings

log = logging.getLogger("researchflow.mcp")

BATCH_ID = "adhoc"  # as `researchflow run`: the same topic from either is one report
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    status: str  # Prefect's state type: SCHEDULED, PENDING, RUNNING, COMPLETED, FAILED, ...
    how: str  # "deployment" or "in-process"
    topic: str
    report_id: str | None = None  # once COMPLETED and stored
    message: str | None = None  # the state's message (a failed topic's one line)


class RunNotFound(LookupError):
    pass


class TopicRuns:
    def __init__(self, settings: Settings, *, deployment: str | None, external_api: bool,
                 store_has: Any = None) -> None:
        self.settings = settings
        self.deployment = deployment
        self.external_api = external_api
        self._store_has = store_has or (lambda report_id: True)
        self._pool = ThreadPoolExecutor(max_workers=settings.max_topic_concurrency,
                                        thread_name_prefix="mcp-topic")
        self._local: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._api_url: str | None = None  # the local API's, once started (no configured one)

    @contextmanager
    def _prefect(self) -> Iterator[None]:
        """Prefect calls, in any thread, against the API this server uses. Prefect keeps its
        settings in a context variable: the local API that flows.local_api starts is set in
        the thread that started it only, so every other thread sets it again here."""
        if self.external_api:  # PREFECT_API_URL was in the environment when Prefect loaded
            yield
            return
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from flows.local_api import ensure_api

        with self._lock:
            if self._api_url is None:
                self._api_url = ensure_api() or PREFECT_API_URL.value()
        with temporary_settings(updates={PREFECT_API_URL: self._api_url}):
            yield

    # ---- starting ---------------------------------------------------------------------------

    def start(self, topic: str, options: TopicOptions) -> RunInfo:
        Topic.of(topic, options)  # the flow's own checks, up front
        parameters = self._parameters(topic, options)
        if self.external_api and self.deployment and self._deployment_exists():
            from prefect.deployments import run_deployment

            run = run_deployment(self.deployment, parameters=parameters, timeout=0,
                                 as_subflow=False)
            return self._info(run, "deployment")
        return self._start_here(parameters)

    def _parameters(self, topic: str, options: TopicOptions) -> dict[str, Any]:
        s = self.settings
        parameters: dict[str, Any] = {"topic": topic, "options": options.model_dump(),
                                      "batch_id": BATCH_ID, "db_path": s.store_target()}
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
            log.warning("no deployment %s on the Prefect API: running topics in this process",
                        self.deployment)
            return False

    def _start_here(self, parameters: dict[str, Any]) -> RunInfo:
        from prefect.client.orchestration import get_client

        from flows.topic import research_topic as flow

        with self._prefect(), get_client(sync_client=True) as client:
            run = client.create_flow_run(flow, name=f"topic: {parameters['topic'][:60]}",
                                         parameters=parameters, tags=["mcp"])
        future = self._pool.submit(self._run, flow, run, parameters)
        with self._lock:
            self._local[str(run.id)] = future
        return self._info(run, "in-process")

    def _run(self, flow, run, parameters: dict[str, Any]):
        from prefect.flow_engine import run_flow

        with self._prefect():
            return run_flow(flow, flow_run=run, parameters=parameters, return_type="state")

    # ---- reading ----------------------------------------------------------------------------

    def status(self, run_id: str) -> RunInfo:
        try:
            key = uuid.UUID(run_id.strip())
        except (ValueError, AttributeError):
            raise RunNotFound(f"{run_id!r} is not a run id (a UUID that research_topic "
                              "returned)") from None
        with self._lock:
            here = str(key) in self._local
        if not here and not self.external_api:
            raise RunNotFound(f"no run {key} was started by this server (runs started "
                              "elsewhere are found through PREFECT_API_URL)")
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        try:
            with self._prefect(), get_client(sync_client=True) as client:
                run = client.read_flow_run(key)
        except ObjectNotFound:
            raise RunNotFound(f"no flow run {key} on the Prefect API") from None
        return self._info(run, "in-process" if here else "deployment")

    def _info(self, run, how: str) -> RunInfo:
        state = run.state
        status = state.type.value if state is not None else "PENDING"
        params = run.parameters or {}
        topic = str(params.get("topic", ""))
        report_id = None
        message = (state.message or None) if state is not None else None
        with self._lock:
            future = self._local.get(str(run.id))
        if future is not None and future.done() and future.exception() is not None \
                and status not in FINAL:  # the engine itself failed before it set a state
            status, message = "CRASHED", f"{type(future.exception()).__name__}: " \
                                         f"{future.exception()}"[:500]
        if status == "PAUSED":  # review_plan: the form is the UI's, on the run's page
            message = "the plan waits for review: Resume on the run's page in the Prefect UI"
        if status == "COMPLETED" and topic:
            batch = str(params.get("batch_id") or BATCH_ID)
            candidate = report_id_for(batch, Topic(text=topic, batch_id=batch).topic_id)
            report_id = candidate if self._store_has(candidate) else None
        return RunInfo(run_id=str(run.id), status=status, how=how, topic=topic,
                       report_id=report_id, message=message)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
