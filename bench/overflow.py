"""Benchmark: recovering from context overflow, the anchor's policy against ours, side by side.

Every scenario (bench/scenarios.py) is a request that does not fit a 16k-token window: findings
for the report at 1.1x, 2x and 10x the window in English and Chinese, and researcher transcripts
with one oversized tool result. Each is replayed through the real openai / anthropic /
google-genai SDK against a loopback server that enforces the window and answers with that
provider's real overflow error (tests/fakes/providers.py), so every failed call is a real HTTP
round trip and every signal comes from `core.signals.classify` on a real SDK exception.

Policies:
- anchor (open_deep_research): findings cut to window x 4 characters on the first overflow, then
  x 0.9, at most 3 retries, the error's numbers ignored; transcripts lose everything from the last
  AI message on (the compression instruction with it), at most 3 calls in all.
- ours: `core.overflow.recovery.report_with_shrink` / `compress_with_shrink` as the pipeline runs them,
  except that the report's pre-fit is off, so both policies start from the same overflow. Its
  token estimator is first calibrated by a few small calls to the same model, as a run's plan
  and condense calls calibrate it; it matters only when the error gives no numbers.

Then every role on a small window (bench/roles.py): plan, queries, condense with a page five
times the window, and output-side overflows of plan, compress and report, each with the window
unknown (goal: at most one failed call) and known (goal: none, the pre-flight fits it).

Prints one row per scenario and policy, then per policy: failed calls per recovered overflow,
overflows never recovered, and the mean share of the window the successful prompt used. Exits 1
when ours misses the goal: every scenario recovered, at most one failed call where the error gave
numbers, and at least 80% of the window used by the successful prompt.

    python bench/overflow.py            # all scenarios
    python bench/overflow.py --smoke    # four of them (the test suite runs this)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

from bench.roles import SPECS as ROLE_SPECS, format_roles, role_misses, run_roles  # noqa: E402
from bench.scenarios import (MAX_OUTPUT_TOKENS, WINDOW, Scenario, all_scenarios,  # noqa: E402
                             make_findings, make_plan, make_transcript, prose,
                             smoke_scenarios)
from core.models import ReportDraft  # noqa: E402
from core.llm.base import ChatModel  # noqa: E402
from core.llm.registry import make_model  # noqa: E402
from core.models import Finding, Message, ResearchPlan, SubQuestion, Transcript  # noqa: E402
from core.overflow.recovery import compress_with_shrink, report_with_shrink  # noqa: E402
from core.settings import Settings  # noqa: E402
from core.overflow.shrink import render_findings  # noqa: E402
from core.signals import ContextOverflow, Signal  # noqa: E402
from core.overflow.tokens import TokenEstimator  # noqa: E402
from tests.fakes.http import Recorded, Reply, ScriptedServer  # noqa: E402
from tests.fakes.providers import WindowEnforcingHandler  # noqa: E402

SPECS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5",
         "gemini": "gemini:gemini-2.5-flash"}
URL_SUFFIX = {"openai": "/v1", "anthropic": "", "gemini": ""}
REPORT_SYSTEM = "Write a cited research report from the findings. Cite quotes by their [E<n>] key."
COMPRESS_SYSTEM = "Compress this research transcript into claims with verbatim quoted evidence."
ANCHOR_REPORT_RETRIES = 3  # open_deep_research: max_retries = 3 after the first call
ANCHOR_COMPRESS_CALLS = 3  # open_deep_research: max_attempts = 3 calls in all
GOAL_WINDOW_SHARE = 0.80
WARMUP_CALLS = 8  # a run makes dozens of plan/condense calls before it writes the report


# --- the loopback provider -------------------------------------------------------------------

@dataclass
class NoNumbers:
    """An OpenAI-compatible server (vLLM) whose overflow error states no usable counts."""

    inner: WindowEnforcingHandler

    def __call__(self, rec: Recorded) -> Reply:
        reply = self.inner(rec)
        if reply.status != 400:
            return reply
        return Reply(400, {"object": "error", "type": "BadRequestError", "param": None,
                           "code": 400,
                           "message": "max_tokens must be at least 1, got -186."})


def serve(server: ScriptedServer, scenario: Scenario) -> WindowEnforcingHandler:
    """A fresh window-enforcing provider behind `server` (its counters start at zero)."""
    handler = WindowEnforcingHandler(scenario.provider, WINDOW,  # type: ignore[arg-type]
                                     chars_per_token=scenario.bytes_per_token)
    server.default = handler if scenario.numbers else NoNumbers(handler)
    return handler


def connect(server: ScriptedServer, scenario: Scenario) -> tuple[ChatModel, WindowEnforcingHandler]:
    """A real SDK-backed model pointed at a fresh window-enforcing handler on `server`."""
    handler = serve(server, scenario)
    base = server.url + URL_SUFFIX[scenario.provider]
    settings = Settings(_env_file=None, request_timeout=30, openai_api_key="sk-bench",
                        anthropic_api_key="sk-bench", gemini_api_key="sk-bench",
                        openai_base_url=base, anthropic_base_url=base, gemini_base_url=base)
    return make_model(SPECS[scenario.provider], settings), handler


# --- the calls both policies make ------------------------------------------------------------

def report_messages(plan: ResearchPlan, findings_text: str) -> list[Message]:
    return [Message(role="system", content=REPORT_SYSTEM),
            Message(role="user", content=f"Research brief: {plan.brief}\n\nFindings:\n"
                                         f"{findings_text}")]


def compress_messages(transcript: Sequence[Message]) -> list[Message]:
    return [Message(role="system", content=COMPRESS_SYSTEM), *transcript]


@dataclass
class ThinEngine:
    """Just the two calls that overflow, each one real chat completion (what recovery drives)."""

    model: ChatModel
    estimator: TokenEstimator
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    name: str = "bench"

    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        self.model.complete(report_messages(plan, render_findings(findings)),
                            max_tokens=max_tokens or self.max_output_tokens)
        return ReportDraft(title=plan.topic, summary="", sections=())

    def report_frame_tokens(self, plan: ResearchPlan) -> int:
        """The report prompt without findings (read by `report_with_shrink`)."""
        return self.estimator.estimate(report_messages(plan, ""), model=self.model.model)

    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        self.model.complete(compress_messages(transcript.messages),
                            max_tokens=max_tokens or self.max_output_tokens)
        sq = transcript.subquestion
        return Finding(subquestion_index=sq.index, subquestion=sq.question, claims=())


# --- the two policies --------------------------------------------------------------------------

@dataclass
class Outcome:
    recovered: bool
    instruction_kept: bool = True


def anchor_report(model: ChatModel, plan: ResearchPlan, findings: list[Finding]) -> Outcome:
    """open_deep_research's final_report_generation: chars = window x 4, then x 0.9."""
    text = render_findings(findings)
    limit = 0
    for retry in range(ANCHOR_REPORT_RETRIES + 1):
        try:
            model.complete(report_messages(plan, text), max_tokens=MAX_OUTPUT_TOKENS)
            return Outcome(True)
        except ContextOverflow:
            limit = WINDOW * 4 if retry == 0 else int(limit * 0.9)  # numbers ignored
            text = text[:limit]
        except Signal:
            return Outcome(False)
    return Outcome(False)


def remove_up_to_last_ai_message(messages: list[Message]) -> list[Message]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            return messages[:i]
    return messages


def anchor_compress(model: ChatModel, messages: list[Message]) -> Outcome:
    """open_deep_research's compress_research: drop from the last AI message on, 3 calls."""
    for _ in range(ANCHOR_COMPRESS_CALLS):
        try:
            model.complete(compress_messages(messages), max_tokens=MAX_OUTPUT_TOKENS)
            return Outcome(True, instruction_kept=messages[-1].role == "user"
                           and len(messages) > 2)
        except ContextOverflow:
            messages = remove_up_to_last_ai_message(messages)
        except Signal:
            return Outcome(False)
    return Outcome(False)


def warm_estimator(model: ChatModel, lang: str, calls: int = WARMUP_CALLS) -> TokenEstimator:
    """An estimator calibrated by a few earlier calls to the same model, as a real run's plan
    and condense calls calibrate it before the report (what ours falls back on without numbers)."""
    est = TokenEstimator()
    rng = random.Random(f"warmup-{lang}")
    for _ in range(calls):
        messages = [Message(role="system", content="Take notes on this page."),
                    Message(role="user", content=prose(rng, lang, 60))]  # type: ignore[arg-type]
        done = model.complete(messages, max_tokens=MAX_OUTPUT_TOKENS)
        est.calibrate(messages, done.usage.input_tokens, model=model.model)
    return est


def ours_report(model: ChatModel, plan: ResearchPlan, findings: list[Finding],
                est: TokenEstimator) -> Outcome:
    engine = ThinEngine(model, est)
    try:
        report_with_shrink(engine, plan, findings, window=WINDOW,
                           max_output_tokens=MAX_OUTPUT_TOKENS, prefit=False)
    except Signal:
        return Outcome(False)
    return Outcome(True)


def ours_compress(model: ChatModel, messages: list[Message], spill_dir: Path | None,
                  est: TokenEstimator) -> Outcome:
    engine = ThinEngine(model, est)
    sq = SubQuestion(index=0, question="What is known about context windows?")
    transcript = Transcript(subquestion=sq, messages=messages)
    sent: list[list[Message]] = []
    compress = engine.compress

    def recording(t: Transcript, *, max_tokens: int | None = None) -> Finding:
        sent.append(list(t.messages))
        return compress(t, max_tokens=max_tokens)

    engine.compress = recording  # type: ignore[method-assign]
    try:
        compress_with_shrink(engine, transcript, max_output_tokens=MAX_OUTPUT_TOKENS,
                             spill_dir=spill_dir)
    except Signal:
        return Outcome(False)
    return Outcome(True, instruction_kept=sent[-1][-1].content == messages[-1].content)


# --- running and reporting ---------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    scenario: Scenario
    policy: str
    failed_calls: int
    recovered: bool
    final_tokens: int | None  # the successful prompt, as the server counted it
    instruction_kept: bool

    @property
    def share(self) -> float | None:
        return self.final_tokens / WINDOW if self.recovered and self.final_tokens else None


Policy = Callable[[ChatModel, Scenario, Path | None], Outcome]


def _inputs(scenario: Scenario) -> tuple[ResearchPlan, list[Finding] | list[Message]]:
    plan = make_plan(scenario.lang)
    if scenario.kind == "findings":
        return plan, make_findings(scenario.lang, int(WINDOW * scenario.size_x))
    return plan, make_transcript(scenario.lang, rounds=4,
                                 oversized_round=scenario.oversized_round,
                                 oversized_tokens=int(WINDOW * scenario.size_x),
                                 normal_tokens=WINDOW // 10)


def run_one(server: ScriptedServer, scenario: Scenario, policy: str, inputs: Any,
            spill_dir: Path | None) -> Row:
    model, handler = connect(server, scenario)
    plan, payload = inputs
    if policy == "ours":
        est = warm_estimator(model, scenario.lang)
        handler = serve(server, scenario)  # the warm-up calls are not the scenario's
    if scenario.kind == "findings":
        out = (anchor_report(model, plan, payload) if policy == "anchor"
               else ours_report(model, plan, payload, est))
    else:
        out = (anchor_compress(model, list(payload)) if policy == "anchor"
               else ours_compress(model, list(payload), spill_dir, est))
    final = handler.seen[-1][0] if out.recovered and handler.seen else None
    return Row(scenario, policy, handler.overflows, out.recovered, final, out.instruction_kept)


def run(scenarios: Sequence[Scenario], spill_dir: Path | None = None) -> list[Row]:
    rows: list[Row] = []
    with ScriptedServer() as server:  # one server for all: shutting one down costs 0.5 s
        for scenario in scenarios:
            inputs = _inputs(scenario)
            for policy in ("anchor", "ours"):
                rows.append(run_one(server, scenario, policy, inputs, spill_dir))
    return rows


def _cell(row: Row | None) -> str:
    if row is None:
        return ""
    share = f"{row.share:.0%}" if row.share is not None else "-"
    note = "" if row.instruction_kept else " instr.lost"
    return f"{row.failed_calls:>2}  {'yes' if row.recovered else 'NO ':<3}  {share:>4}{note}"


def summary(rows: Sequence[Row], policy: str) -> dict[str, float | int]:
    mine = [r for r in rows if r.policy == policy]
    ok = [r for r in mine if r.recovered]
    return {"overflows": len(mine), "recovered": len(ok),
            "never": len(mine) - len(ok),
            "failed_per_recovered": (sum(r.failed_calls for r in ok) / len(ok)) if ok else 0.0,
            "mean_share": (sum(r.share or 0 for r in ok) / len(ok)) if ok else 0.0,
            "instr_lost": sum(1 for r in ok if not r.instruction_kept)}


def goal_misses(rows: Sequence[Row]) -> list[str]:
    """Why our policy misses the goal, one line per scenario (empty: the goal is met)."""
    misses = []
    for r in rows:
        if r.policy != "ours":
            continue
        name = f"{r.scenario.provider}/{r.scenario.name}"
        if not r.recovered:
            misses.append(f"{name}: never recovered")
            continue
        if r.scenario.numbers and r.failed_calls > 1:
            misses.append(f"{name}: {r.failed_calls} failed calls with numbers in the error")
        if r.share is not None and r.share < GOAL_WINDOW_SHARE:
            misses.append(f"{name}: successful prompt used {r.share:.0%} of the window")
        if not r.instruction_kept:
            misses.append(f"{name}: compression instruction lost")
    return misses


def format_table(rows: Sequence[Row]) -> str:
    by_key = {(r.scenario, r.policy): r for r in rows}
    scenarios = list(dict.fromkeys(r.scenario for r in rows))
    head = (f"{'scenario':<30} {'provider':<9} {'size':>5} {'nums':<4} | "
            f"{'anchor: fail ok window':<30} | {'ours: fail ok window':<30}")
    lines = [f"Context overflow recovery: window {WINDOW} tokens, max_tokens "
             f"{MAX_OUTPUT_TOKENS}; fail = failed calls, window = successful prompt / window",
             head, "-" * len(head)]
    for s in scenarios:
        lines.append(f"{s.name:<30} {s.provider:<9} {s.size_x:>4g}x {'yes' if s.numbers else 'no':<4}"
                     f" | {_cell(by_key.get((s, 'anchor'))):<30} | "
                     f"{_cell(by_key.get((s, 'ours'))):<30}")
    lines.append("-" * len(head))
    sums = {p: summary(rows, p) for p in ("anchor", "ours")}
    for label, key, fmt in (("failed calls per recovered overflow", "failed_per_recovered",
                             "{:.2f}"),
                            ("overflows never recovered", "never", "{:d}"),
                            ("mean window share of successful prompts", "mean_share", "{:.0%}"),
                            ("recoveries that lost the compression instruction", "instr_lost",
                             "{:d}")):
        cells = [fmt.format(sums[p][key]) + f" of {sums[p]['overflows']}" * (key == "never")
                 for p in ("anchor", "ours")]
        lines.append(f"{label:<51} | anchor {cells[0]:<22} | ours {cells[1]}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="run four scenarios only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-spill-") as spill:
        rows = run(smoke_scenarios() if args.smoke else all_scenarios(), Path(spill))
    print(format_table(rows))
    role_rows = run_roles(("openai",) if args.smoke else tuple(ROLE_SPECS))
    print("\n" + format_roles(role_rows))
    misses = goal_misses(rows) + role_misses(role_rows)
    print(f"\nours meets the goal (recovers every scenario, <=1 failed call when the error "
          f"gives numbers, >={GOAL_WINDOW_SHARE:.0%} of the window; every role: <=1 failed "
          f"call with the window unknown, none with it known): "
          f"{'yes' if not misses else 'NO'}  [{time.perf_counter() - started:.1f} s]")
    for line in misses:
        print(f"  - {line}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
