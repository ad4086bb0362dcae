"""Every role on a small window: failed calls per role, with the window unknown and known.

Each role of the LLM engine runs through the real openai / anthropic / google-genai SDK against a
loopback provider that enforces a 6,000-token window (4,500 for the output-side cases, where the
prompt fits but prompt + the default 4,096-token output cap does not) and answers with its real
overflow error:

- plan, output side: the plan prompt is small, its output cap too large for the window;
- queries: the follow-up-query prompt carries notes twice the window;
- condense: one page five times the window (condensed in pieces, notes merged);
- compress and report, output side: small inputs, the default output cap too large.

"unknown" starts from the built-in table (which believes 128k or more): the first overflow
teaches the window, so the goal is at most one failed call per role. "known" sets the window
with an override: the pre-flight must fit every request, so the goal is zero failed calls.
Used by bench/overflow.py, which prints this table after its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from core.engine.model_driven.llm_engine import LLMEngine
from core.accounting.ledger import acting_as
from core.llm.registry import make_model
from core.models import (Claim, Evidence, Finding, Message, ResearchPlan, Source, SubQuestion,
                         ToolCall, Topic, Transcript)
from core.overflow.windows import ContextLimits
from core.overflow.recovery import compress_with_shrink, report_with_shrink
from core.overflow.roles import condense_with_shrink, plan_with_shrink, queries_with_shrink
from core.overflow.tokens import TokenEstimator
from core.settings import Settings
from tests.fakes.http import ScriptedServer
from tests.fakes.providers import WindowEnforcingHandler
from tests.fakes.research_provider import responder

SPECS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5",
         "gemini": "gemini:gemini-2.5-flash"}
SUFFIX = {"openai": "/v1", "anthropic": "", "gemini": ""}
SQ = SubQuestion(index=0, question="How do threading and asyncio differ in waiting?")
PAGE = Source(url="https://bench.test/waiting", title="Waiting in threading and asyncio",
              text="\n\n".join(" ".join(f"Waiting example {i}-{k} shows that a program blocks "
                                        f"for {i * 10 + k} milliseconds." for k in range(6))
                               for i in range(100)))


@dataclass(frozen=True)
class RoleRow:
    role: str
    provider: str
    window: int
    unknown_failed: int
    unknown_ok: bool
    known_failed: int
    known_ok: bool


def _transcript(pieces: int) -> Transcript:
    t = Transcript(subquestion=SQ, queries_run=["threading asyncio waiting"],
                   sources=[PAGE])
    paragraphs = PAGE.text.split("\n\n")
    t.messages.insert(0, Message(role="user", content="Research the sub-question."))
    for i in range(pieces):
        call = ToolCall(id=f"r0f{i}", name="read", arguments={"url": PAGE.url})
        t.messages += [Message(role="assistant", content="", tool_calls=(call,)),
                       Message(role="tool", tool_call_id=call.id, name="read",
                               content=f"Source: {PAGE.title} <{PAGE.url}>\n"
                                       f"{paragraphs[i % len(paragraphs)]}")]
    return t


def _findings() -> list[Finding]:
    quote = PAGE.text.split("\n\n")[0].split(". ")[0] + "."
    claim = Claim(text="Programs block while waiting.", confidence="medium",
                  evidence=(Evidence(url=PAGE.url, title=PAGE.title, quote=quote),))
    return [Finding(subquestion_index=0, subquestion=SQ.question, claims=(claim,))]


PLAN = ResearchPlan(topic="Threading or asyncio for waiting", brief="Compare them.",
                    intent="describe", subquestions=(SQ,))
CASES: dict[str, tuple[int, Callable[[LLMEngine], object]]] = {
    "plan (output side)": (4_500, lambda e: plan_with_shrink(
        e, Topic(text="Threading or asyncio for waiting on sockets"))),
    "queries (long notes)": (6_000, lambda e: queries_with_shrink(e, _transcript(60), 1)),
    "condense (page 5x window)": (6_000, lambda e: condense_with_shrink(e, SQ, PAGE)),
    "compress (output side)": (4_500, lambda e: compress_with_shrink(e, _transcript(2))),
    "report (output side)": (4_500, lambda e: report_with_shrink(
        e, PLAN, _findings(), window=e.context_window())),
}


def _run(provider: str, window: int, known: bool, case: Callable[[LLMEngine], object]
         ) -> tuple[int, bool]:
    handler = WindowEnforcingHandler(provider, window, respond=responder(provider))  # type: ignore[arg-type]
    with ScriptedServer(default=handler) as server:
        base = server.url + SUFFIX[provider]
        settings = Settings(_env_file=None, request_timeout=30, openai_api_key="sk-bench",
                            anthropic_api_key="sk-bench", gemini_api_key="sk-bench",
                            openai_base_url=base, anthropic_base_url=base, gemini_base_url=base)
        model = make_model(SPECS[provider], settings)
        limits = ContextLimits({model.model: window} if known else None)
        engine = LLMEngine(model, limits=limits, estimator=TokenEstimator(),
                           max_output_tokens=4_096)
        try:
            with acting_as("other"):
                case(engine)
            ok = True
        except Exception:  # noqa: BLE001 - a role that fails is what the table reports
            ok = False
    return handler.overflows, ok


def run_roles(providers: tuple[str, ...] = tuple(SPECS)) -> list[RoleRow]:
    rows = []
    for role, (window, case) in CASES.items():
        for provider in providers:
            unknown = _run(provider, window, False, case)
            known = _run(provider, window, True, case)
            rows.append(RoleRow(role, provider, window, unknown[0], unknown[1], known[0],
                                known[1]))
    return rows


def format_roles(rows: list[RoleRow]) -> str:
    head = (f"{'role':<26} {'provider':<9} {'window':>6} | {'unknown: failed ok':<20} | "
            f"{'known: failed ok':<18}")
    lines = ["Every role on a small window (failed calls = overflow errors received)", head,
             "-" * len(head)]
    for r in rows:
        lines.append(f"{r.role:<26} {r.provider:<9} {r.window:>6} | "
                     f"{r.unknown_failed:>6} {'yes' if r.unknown_ok else 'NO':<13} | "
                     f"{r.known_failed:>6} {'yes' if r.known_ok else 'NO'}")
    lines.append("-" * len(head))
    per_role: dict[str, list[RoleRow]] = {}
    for r in rows:
        per_role.setdefault(r.role.split(" ")[0], []).append(r)
    for role, rs in per_role.items():
        lines.append(f"{role:<26} failed calls per run: unknown window "
                     f"{sum(r.unknown_failed for r in rs) / len(rs):.2f}, known window "
                     f"{sum(r.known_failed for r in rs) / len(rs):.2f}")
    return "\n".join(lines)


def role_misses(rows: list[RoleRow]) -> list[str]:
    misses = []
    for r in rows:
        name = f"{r.role}/{r.provider}"
        if not (r.unknown_ok and r.known_ok):
            misses.append(f"{name}: did not complete")
        if r.unknown_failed > 1:
            misses.append(f"{name}: {r.unknown_failed} failed calls with the window unknown")
        if r.known_failed:
            misses.append(f"{name}: {r.known_failed} failed calls with the window known")
    return misses
