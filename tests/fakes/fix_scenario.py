"""A batch whose second topic has no page in the corpus, then the page is added and the batch
run again: shared by tests and the closing figures of issue 33.

Two topics run through the real batch flow and the real openai SDK against the loopback research
provider, over a corpus of pages (tests/fakes/research_provider.py `write_pages`). The second
topic asks about deadlocks, which no page names: the gate refuses it (NoEvidence) while the
first topic's report is stored. `fix()` adds the page on deadlocks; the batch then runs again,
as the CLI does (a new run, the same edition), as the UI's Retry or `prefect flow-run retry`
does (the same flow run, on a real Prefect server), or as `researchflow retry` does. The
provider counts its calls, so the rerun's calls are what the new page touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.http import ScriptedServer
from tests.fakes.prefect_server import PrefectServer
from tests.fakes.rerun_scenario import retry_outside
from tests.fakes.research_provider import SDK_ENV, TEST_MODELS, ResearchProvider, write_batch

SUBJECTS = ("memory use", "blocking calls", "waiting on sockets")
TOPICS = ("Threading or asyncio for waiting on sockets",
          "How long can a deadlock stall a program?")
DEADLOCKS = """# Deadlocks

A deadlock stalls a program for as long as two tasks each wait on a lock the other one holds.

Neither task runs again until one of them gives up its lock, so a deadlock can stall a program
forever.

A timeout on the lock turns a deadlock into an error after that many seconds.
"""


@dataclass(frozen=True)
class FixResult:
    first_state: str
    first_failed: int
    first_error: str
    first_calls: int
    rerun_state: str
    rerun_calls: int  # calls the provider answered in the rerun: what the new page touched
    rerun_served: int  # calls served from the call memo in the rerun (ledger 'served' rows)
    rerun_cached: int  # task runs of the rerun served from Prefect's cache
    reports: int
    repeated: int  # calls answered twice, byte for byte (target 0)


class FixScenario:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.corpus, self.csv, self.db = write_batch(work, SUBJECTS, TOPICS, sentences=12)
        self.provider = ResearchProvider("openai", topic_queries=True)
        self.batch_id = "fix"

    def parameters(self) -> dict:
        return dict(csv_path=str(self.csv), batch_id=self.batch_id, model=TEST_MODELS["openai"],
                    search="corpus", corpus_dir=str(self.corpus), db_path=str(self.db),
                    max_concurrency=2)

    def fix(self) -> None:
        (self.corpus / "deadlocks.md").write_text(DEADLOCKS, encoding="utf-8")

    def run(self, way: str, api_url: str | None = None) -> FixResult:
        """`way`: "cli", "retry" (Prefect's) or "researchflow-retry"; a retry runs against the
        Prefect server at `api_url`, else one this scenario starts."""
        from tasks import contexts

        contexts.close()
        key_var, url_var, suffix = SDK_ENV["openai"]
        with ScriptedServer(default=self.provider) as server:
            env = {key_var: "sk-fix-not-a-real-key", url_var: server.url + suffix}
            os.environ.update(env)
            try:
                if way == "cli":
                    from flows.batch import research_batch

                    first = research_batch(**self.parameters(), return_state=True)
                    return self._rerun(first, None, lambda: research_batch(
                        **self.parameters(), return_state=True))
                return self._retry(env, api_url, by_researchflow=way == "researchflow-retry")
            finally:
                for name in env:
                    os.environ.pop(name, None)

    def _retry(self, env: dict, api_url: str | None, by_researchflow: bool) -> FixResult:
        if api_url is None:
            with PrefectServer(self.work / "prefect-server") as started:
                return self._retry(env, started, by_researchflow)
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from flows.batch import research_batch

        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            first = research_batch(**self.parameters(), return_state=True)
            run_id = str(first.state_details.flow_run_id)

            return self._rerun(first, run_id, lambda: retry_outside(
                run_id, env, api_url, by_researchflow=by_researchflow))

    def _rerun(self, first, run_id: str | None, rerun) -> FixResult:
        from core.store import query_readonly
        from tasks import contexts

        _, failed = query_readonly(self.db, "SELECT count(*), max(error) FROM topics "
                                            "WHERE status = 'failed'")
        first_calls, repeated_before = self.provider.calls, self.provider.repeated_successes
        _, served_before = query_readonly(self.db, "SELECT count(*) FROM ledger "
                                                   "WHERE outcome = 'served'")
        self.fix()
        contexts.close()
        second = rerun()
        contexts.close()
        _, served = query_readonly(self.db, "SELECT count(*) FROM ledger "
                                            "WHERE outcome = 'served'")
        _, reports = query_readonly(self.db, "SELECT count(DISTINCT report_id) FROM reports "
                                             f"WHERE batch_id = '{self.batch_id}'")
        state = getattr(getattr(second, "type", None), "value", second)
        return FixResult(first_state=first.type.value, first_failed=failed[0][0],
                         first_error=failed[0][1] or "", first_calls=first_calls,
                         rerun_state=str(state), rerun_calls=self.provider.calls - first_calls,
                         rerun_served=served[0][0] - served_before[0][0],
                         rerun_cached=_cached_task_runs(run_id) if run_id else -1,
                         reports=reports[0][0],
                         repeated=self.provider.repeated_successes - repeated_before)


def _cached_task_runs(flow_run_id: str) -> int:
    """Task runs of the flow run (the retried one, its subflows' too) that ended Cached."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId, \
        TaskRunFilter, TaskRunFilterFlowRunId, TaskRunFilterStateName

    with get_client(sync_client=True) as client:
        runs = [flow_run_id] + [str(r.id) for r in client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(
                any_=[flow_run_id])))]
        cached = client.read_task_runs(task_run_filter=TaskRunFilter(
            flow_run_id=TaskRunFilterFlowRunId(any_=runs),
            state=dict(name=TaskRunFilterStateName(any_=["Cached"]))))
        return len(cached)
