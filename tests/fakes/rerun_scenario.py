"""A batch whose second topic is refused partway, then rerun: shared by bench/rerun.py and tests.

Two topics run through the real batch flow and the real openai SDK against the loopback research
provider. While `refusing`, every call of one role (`refuse_role`) for the second topic is
answered with a fatal 400, so that topic fails after its other calls succeeded. The rerun goes
after the cause is removed, either as the CLI does (a new run of the batch flow) or as
`prefect flow-run retry` does (the same flow run, executed again by Prefect's own CLI in another
process, against a real Prefect server that this scenario starts), or as `researchflow retry`
does (the same, naming the flow's entrypoint itself).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.fakes.prefect_server import PrefectServer
from tests.fakes.research_provider import (SDK_ENV, TEST_MODELS, ResearchProvider, answer,
                                          last_user_text, role_of, write_batch)

ROOT = Path(__file__).resolve().parents[2]
SUBJECTS = ("memory use", "blocking calls", "waiting on sockets", "locks")
TOPICS = ("Threading or asyncio for waiting on sockets (first topic)",
          "Threading or asyncio for blocking calls (second topic)")
MARKER = "(second topic)"


@dataclass(frozen=True)
class RerunResult:
    first_ok: int
    first_failed: int
    rerun_calls: int
    repeated: int
    reports: int
    distinct_reports: int
    first_state: str
    rerun_state: str

    def __str__(self) -> str:
        return (f"first run {self.first_state}: {self.first_ok} ok calls, {self.first_failed} "
                f"topic(s) failed; rerun {self.rerun_state}: {self.rerun_calls} calls, "
                f"{self.repeated} ok calls repeated; {self.reports} reports "
                f"({self.distinct_reports} distinct)")


# Multi-call steps, each refused after an earlier call of the same step succeeded:
#   chunked  a page too long for the (configured) window is condensed in pieces: the second
#            piece of a second-topic page is refused;
#   reask    a second-topic choice of pages is answered with prose first (a successful call),
#            and the re-ask that quotes the parse error is refused;
#   shrink   a second-topic condense of a whole page overflows the window (an error naming no
#            numbers, so the page is halved), the first half succeeds and the second is refused.
CASES = ("step", "chunked", "reask", "shrink")
SECOND = "second topic"  # in every request of the second topic (its sub-questions name it)
CHUNKED_WINDOWS = '{"gpt-4o-mini": 6000}'  # a page of 150 sentences needs two pieces
SHRINK_SENTENCES = 20  # a condense request showing more sentences than this overflows


def _refusal() -> Reply:
    return Reply(400, fake.error_body(
        "openai", 400, "Your request was rejected as a result of our safety system.",
        code="content_policy_violation"))


class RefusingProvider:
    """The research provider, refusing one role of the second topic (or, for a multi-call
    `case`, the call after one that succeeded in the same step) while `refusing` is set."""

    def __init__(self, refuse_role: str, on_refuse: Callable[[], None] | None = None,
                 case: str = "step") -> None:
        self.inner = ResearchProvider("openai")
        self.refuse_role = refuse_role
        self.case = case
        self.refusing = True
        self.refused = 0
        self.overflows = 0
        self._first_piece: dict[tuple[str, ...], str] = {}
        self.on_refuse = on_refuse  # runs before the refusal is sent (e.g. lock the store)

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json() or {}
        text = json.dumps(body, ensure_ascii=False)
        role = role_of("openai", body)
        if self.case == "step":
            if self.refusing and role == self.refuse_role and MARKER in text:
                return self._refuse()
            return self.inner(rec)
        if SECOND not in text:
            return self.inner(rec)
        if self.case == "chunked" and role == "condense":
            if self.refusing and self._later_piece(body):
                return self._refuse()
        elif self.case == "shrink" and role == "condense":
            if len(re.findall(r"\\n\[\d+\] ", text)) > SHRINK_SENTENCES:
                self.overflows += 1
                return Reply(400, fake.error_body(
                    "openai", 400, "The request is too long for this model's context window.",
                    code="context_length_exceeded", param="messages"))
            if self.refusing and self._later_piece(body):
                return self._refuse()
        elif self.case == "reask" and role == "choose":
            asked_again = any(m.get("role") == "assistant" for m in body.get("messages", []))
            if not asked_again:  # prose, not JSON: a successful call the engine re-asks
                return self.inner.prose(rec, "I would read the first three results.")
            if self.refusing:
                return self._refuse()
            asked = {**body, "messages": body["messages"][:-2]}  # the question, not the complaint
            return self.inner.prose(rec, answer("choose", "openai", asked))
        return self.inner(rec)

    def _later_piece(self, body: dict) -> bool:
        """Whether this condense request shows a piece of a page other than the first one
        asked about for its sub-question (pieces are asked in page order)."""
        user = last_user_text("openai", body)
        page = re.search(r"Sub-question: (.*)\n\nPage title: .*\nPage URL: (.*)\n", user)
        key = page.groups() if page else ("?", "?")
        shown = hashlib.sha256(user.encode()).hexdigest()
        return self._first_piece.setdefault(key, shown) != shown

    def _refuse(self) -> Reply:
        self.refused += 1
        if self.on_refuse is not None:
            self.on_refuse()
        return _refusal()

    @property
    def calls(self) -> int:
        return self.inner.calls + self.refused + self.overflows


class RerunScenario:
    def __init__(self, work: Path, refuse_role: str = "report", case: str = "step") -> None:
        if case not in CASES:
            raise ValueError(f"case: one of {CASES}, not {case!r}")
        self.work = work
        self.case = case
        self.corpus, self.csv, self.db = write_batch(work, SUBJECTS, TOPICS,
                                                     sentences=150 if case == "chunked" else 30)
        self.provider = RefusingProvider(refuse_role, case=case)
        # Pieces follow the token calibration, which a fresh process starts anew: a provider
        # whose usage does not move it cuts a page alike in the first run and the rerun.
        self.provider.inner.calibrating = case != "chunked"
        self.batch_id = "rerun"

    def parameters(self) -> dict:
        return dict(csv_path=str(self.csv), batch_id=self.batch_id, model=TEST_MODELS["openai"],
                    search="corpus", corpus_dir=str(self.corpus), db_path=str(self.db),
                    max_concurrency=2)

    def run(self, way: str, api_url: str | None = None) -> RerunResult:
        """`way`: "cli" or "retry"; a retry runs against the Prefect server at `api_url`, else
        against one this scenario starts."""
        from tasks import contexts

        contexts.close()
        key_var, url_var, suffix = SDK_ENV["openai"]
        with ScriptedServer(default=self.provider) as server:
            env = {key_var: "sk-rerun-not-a-real-key", url_var: server.url + suffix}
            if self.case == "chunked":
                env["RESEARCHFLOW_CONTEXT_WINDOWS"] = CHUNKED_WINDOWS
            os.environ.update(env)
            try:
                if way == "cli":
                    return self._cli(env)
                return self._retry(env, api_url, by_researchflow=way == "researchflow-retry")
            finally:
                for name in env:
                    os.environ.pop(name, None)

    def _cli(self, env: dict) -> RerunResult:
        from flows.batch import research_batch

        first = research_batch(**self.parameters(), return_state=True)
        return self._rerun(first, lambda: research_batch(**self.parameters(), return_state=True))

    def _retry(self, env: dict, api_url: str | None, by_researchflow: bool = False) -> RerunResult:
        if api_url is None:
            with PrefectServer(self.work / "prefect-server") as started:
                return self._retry(env, started, by_researchflow)
        from prefect.settings import PREFECT_API_URL, temporary_settings

        from flows.batch import research_batch

        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            first = research_batch(**self.parameters(), return_state=True)
            flow_run_id = str(first.state_details.flow_run_id)

            return self._rerun(first, lambda: retry_outside(flow_run_id, env, api_url,
                                                            by_researchflow=by_researchflow))

    def _rerun(self, first, rerun) -> RerunResult:
        from core.store import query_readonly

        first_ok = self.provider.inner.successes
        _, failed = query_readonly(self.db, "SELECT count(*) FROM topics WHERE status = 'failed'")
        repeated_before = self.provider.inner.repeated_successes
        calls_before = self.provider.calls
        self.provider.refusing = False
        from tasks import contexts

        contexts.close()
        second = rerun()
        _, reports = query_readonly(self.db, "SELECT count(*), count(DISTINCT report_id) "
                                             f"FROM reports WHERE batch_id = '{self.batch_id}'")
        return RerunResult(first_ok=first_ok, first_failed=failed[0][0],
                           rerun_calls=self.provider.calls - calls_before,
                           repeated=self.provider.inner.repeated_successes - repeated_before,
                           reports=reports[0][0], distinct_reports=reports[0][1],
                           first_state=first.type.value, rerun_state=_state_name(second))


def _state_name(state) -> str:
    return getattr(getattr(state, "type", None), "value", str(state))


def retry_outside(flow_run_id: str, env: dict, api_url: str, *, by_researchflow: bool) -> str:
    """Retries a batch's flow run from another process, as a user would (`researchflow retry`,
    or Prefect's `prefect flow-run retry`); the run's final state."""
    bin_dir = Path(sys.executable).parent
    command = ([str(bin_dir / "researchflow"), "retry", flow_run_id] if by_researchflow else
               [str(bin_dir / "prefect"), "flow-run", "retry", flow_run_id,
                "--entrypoint", f"{ROOT}/flows/batch.py:research_batch"])
    subprocess.run(command, cwd=ROOT, env={**os.environ, **env, "PREFECT_API_URL": api_url},
                   capture_output=True, text=True, timeout=600)
    return _final_state(flow_run_id)


def _final_state(flow_run_id: str) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).state.type.value
