"""The LLM engine over the real openai SDK, against a loopback server speaking Chat Completions.

The fake provider answers each role from what it was actually sent (the engine's prompts, the
page text, the evidence keys), so a full plan → condense → compress → write_report pass goes
through the SDK's request building and response parsing, and `core.reports.report.assemble` then
numbers the references. The window-enforcing fake checks the overflow paths: a ContextOverflow from
the provider reaches the caller, and the pre-emptive compaction keeps a request inside the window.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest
from pydantic import SecretStr

from core.engine.model_driven.llm_engine import LLMEngine
from core.overflow.windows import ContextLimits
from core.llm.openai import OpenAIChat
from core.models import Message, Source, SubQuestion, ToolCall, Topic, Transcript
from core.reports.report import assemble, evidence_catalog
from core.signals import ContextOverflow
from core.overflow.tokens import TokenEstimator
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer

MODEL = "gpt-4o-mini"
DUCK = Source(url="https://duck.example/about", title="About DuckDB",
              text="DuckDB is an in-process analytical database.\nIt  processes queries with a "
                   "vectorized engine that handles 2048 rows per batch.\n\nDuckDB is released "
                   "under the MIT License.")
LITE = Source(url="https://lite.example/about", title="About SQLite",
              text="SQLite is the most widely deployed database engine. SQLite is in the public "
                   "domain.\nA typical SQLite library is under 1 MB in size.")
PAGES = {DUCK.url: DUCK, LITE.url: LITE}
FABRICATED = "DuckDB is 100 times faster than every other database."

# What the fake model "knows" per dimension: (claim, [(url, quote as the model writes it)])
CLAIMS = {
    "query execution": ("DuckDB executes queries in vectorized batches of 2048 rows.",
                        [(DUCK.url, "It processes queries with a vectorized engine that "
                                    "handles 2048 rows per batch."),
                         (DUCK.url, FABRICATED)]),
    "licensing": ("DuckDB is MIT licensed while SQLite is public domain.",
                  [(DUCK.url, "DuckDB is released under the MIT License."),
                   (LITE.url, "SQLite is in the public domain.")]),
    "footprint": ("SQLite is under 1 MB.",
                  [(LITE.url, "A typical SQLite library is under 1 MB in size.")]),
}


def _system(body: dict[str, Any]) -> str:
    return body["messages"][0]["content"]


def _last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def respond(body: dict[str, Any]) -> str:
    """A scripted model: answers each engine role from the request it was sent."""
    system = _system(body)
    if "planner of a research team" in system:
        return json.dumps({
            "brief": "Compare DuckDB and SQLite.", "intent": "compare",
            "targets": ["DuckDB", "SQLite"],
            "subquestions": [{"question": f"How do DuckDB and SQLite differ in {dim}?",
                              "queries": [f"duckdb sqlite {dim}"]} for dim in CLAIMS]})
    if "pick the evidence on one web page" in system:  # every sentence, by its number
        ids = re.findall(r"^\[(\d+)\] ", _last_user(body), re.M)
        return json.dumps({"ids": [int(i) for i in ids], "note": "About the database."})
    if "compressing a researcher's working notes" in system:
        dim = next(d for d in CLAIMS if d in system)
        text, evidence = CLAIMS[dim]
        return "```json\n" + json.dumps({"claims": [{
            "text": text, "confidence": "high" if len(evidence) > 1 else "medium",
            "evidence": [{"url": u, "quote": q, "title": "made-up title"} for u, q in evidence]}]}
        ) + "\n```"
    if "write a research report" in system:
        prompt = _last_user(body)
        outline = prompt.rsplit("outline:", 1)[-1]
        blocks = dict(re.findall(r"^### Sub-question (\d+): .*\n((?:.+\n?)*)", prompt, re.M))
        parts = ["# DuckDB vs SQLite"]
        for tag in re.findall(r"^## \[(\w+)\]", outline, re.M):
            if tag.startswith("S"):
                keys = "".join(f"[{k}]" for k in re.findall(r"\[(E\d+)\]", blocks[tag[1:]]))
                parts.append(f"## [{tag}] Dimension {tag[1:]}\n\nThe sources say so {keys}.")
            elif tag == "comparison":
                parts.append("## [comparison] Comparison\n\n| Dimension | DuckDB | SQLite |\n"
                             "|---|---|---|\n| Licence | MIT [E3] | public domain [E4] |")
            else:
                parts.append(f"## [{tag}] {tag.title()}\n\nThey differ [E1].")
        return "\n\n".join(parts)
    return "Checkpoint: " + _last_user(body)[:200]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


def engine_on(srv: ScriptedServer, window: int = 128_000) -> LLMEngine:
    chat = OpenAIChat(MODEL, api_key=SecretStr("sk-test-0123456789"), base_url=srv.url + "/v1",
                      timeout=10)
    return LLMEngine(chat, limits=ContextLimits({MODEL: window}, default=window),
                     estimator=TokenEstimator(), max_output_tokens=1_000)


def research(engine: LLMEngine, sq: SubQuestion) -> Transcript:
    """A researcher's transcript as core.researcher builds it, with notes from engine.condense."""
    t = Transcript(subquestion=sq, queries_run=list(sq.queries))
    calls = tuple(ToolCall(id=f"f{i}", name="read", arguments={"url": url})
                  for i, url in enumerate(PAGES))
    t.messages.append(Message(role="assistant", tool_calls=calls))
    for call, page in zip(calls, PAGES.values()):
        t.sources.append(page)
        t.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                  content=f"Source: {page.title} <{page.url}>\n"
                                          f"{engine.condense(sq, page)}"))
    return t


def test_full_pass_gives_numbered_references_with_verbatim_quotes(server: ScriptedServer
                                                                  ) -> None:
    server.requests.clear()
    server.default = lambda rec: Reply(200, fake.openai_completion(respond(rec.json()),
                                                                   prompt_tokens=400))
    engine = engine_on(server)

    plan = engine.plan(Topic(text="DuckDB vs SQLite for local analytics"))
    assert plan.intent == "compare" and plan.targets == ("DuckDB", "SQLite")
    findings = [engine.compress(research(engine, sq)) for sq in plan.subquestions]
    draft = engine.write_report(plan, findings)
    report = assemble(plan, findings, draft, report_id="r_test", engine=engine.name)

    bodies = [r.json() for r in server.requests]
    assert bodies[0]["response_format"]["type"] == "json_schema"  # structured output asked for
    report_prompt = _last_user(bodies[-1])
    assert set(re.findall(r"\[(E\d+)\]", report_prompt)) == {k for k, _ in
                                                            evidence_catalog(findings)}

    assert [c.number for c in report.citations] == list(range(1, len(report.citations) + 1))
    assert len(report.citations) == 4
    for c in report.citations:
        assert c.quote in PAGES[c.url].text  # verbatim, byte for byte
        assert c.title == PAGES[c.url].title
    assert "It  processes queries" in findings[0].claims[0].evidence[0].quote  # re-anchored
    assert FABRICATED not in report.markdown
    assert "## Comparison" in report.markdown and "MIT [" in report.markdown
    assert "[insufficient evidence]" not in report.markdown
    assert engine.name == "llm:openai:gpt-4o-mini"


def big_transcript() -> Transcript:
    sq = SubQuestion(index=0, question="How do DuckDB and SQLite differ in licensing?")
    t = Transcript(subquestion=sq, sources=[DUCK, LITE])
    for i in range(12):
        call = ToolCall(id=f"c{i}", name="read", arguments={"url": DUCK.url})
        t.messages.append(Message(role="assistant", tool_calls=(call,)))
        t.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                  content=f"Source: {DUCK.title} <{DUCK.url}>\n{DUCK.text}\n"
                                          + f"note {i}: " + "background text. " * 120))
    return t


def test_provider_overflow_reaches_the_caller_as_context_overflow(server: ScriptedServer) -> None:
    handler = fake.WindowEnforcingHandler("openai", 3_000, respond=respond)
    server.default = handler
    engine = engine_on(server)  # believes the window is 128k: no pre-emptive compaction
    with pytest.raises(ContextOverflow) as info:
        engine.compress(big_transcript())
    assert info.value.limit == 3_000
    assert handler.overflows == 1 and handler.successes == 0


def test_preemptive_compaction_keeps_compress_inside_the_window(server: ScriptedServer) -> None:
    handler = fake.WindowEnforcingHandler("openai", 3_000, respond=respond)
    server.default = handler
    engine = engine_on(server, window=3_000)
    finding = engine.compress(big_transcript())
    assert handler.overflows == 0 and handler.successes >= 2  # summaries, then the compression
    assert [e.quote for e in finding.claims[0].evidence] == [
        "DuckDB is released under the MIT License.", "SQLite is in the public domain."]
