"""Plan, follow-up queries and condense on a model whose window we do not know, through the real
SDKs against a loopback provider that enforces the window with its real overflow errors.

The first overflow teaches the window and the call is repeated at once, smaller; a page several
times the window is condensed in pieces and the notes merged (head and tail of the page both
quoted); a known window costs no failed call at all (the pre-flight fits input and output).
"""

from __future__ import annotations

import re
from typing import Iterator

import pytest
from pydantic import SecretStr

from core.engine.model_driven.llm_engine import LLMEngine
from core.llm.registry import make_model
from core.models import Message, Source, SubQuestion, ToolCall, Topic, Transcript
from core.overflow.windows import ContextLimits
from core.overflow.roles import condense_with_shrink, plan_with_shrink, queries_with_shrink
from core.overflow.tokens import TokenEstimator
from core.settings import Settings
from tests.fakes.http import ScriptedServer
from tests.fakes.providers import WindowEnforcingHandler
from tests.fakes.research_provider import responder

SPECS = {"openai": ("openai:gpt-4o-mini", "/v1"), "anthropic": ("anthropic:claude-sonnet-4-5", ""),
         "gemini": ("gemini:gemini-2.5-flash", "")}
SQ = SubQuestion(index=0, question="How do threading and asyncio differ in waiting?")
PAGE = Source(url="https://example.test/waiting", title="Waiting in threading and asyncio",
              text="\n\n".join(" ".join(f"Waiting example {i}-{k} shows that a program blocks "
                                        f"for {i * 10 + k} milliseconds." for k in range(6))
                               for i in range(80)))


def engine_for(provider: str, url: str, limits: ContextLimits) -> LLMEngine:
    spec, suffix = SPECS[provider]
    key = SecretStr("sk-test-roles")
    settings = Settings(openai_api_key=key, openai_base_url=url + suffix, anthropic_api_key=key,
                        anthropic_base_url=url, gemini_api_key=key, gemini_base_url=url)
    return LLMEngine(make_model(spec, settings), limits=limits, estimator=TokenEstimator(),
                     max_output_tokens=4_096)


@pytest.fixture(params=list(SPECS))
def provider(request) -> str:
    return request.param


@pytest.fixture()
def window_server(provider: str) -> Iterator[tuple[ScriptedServer, WindowEnforcingHandler]]:
    handler = WindowEnforcingHandler(provider, 6_000, respond=responder(provider))
    with ScriptedServer(default=handler) as server:
        yield server, handler


def test_a_page_five_windows_long_costs_one_overflow_and_keeps_head_and_tail(provider,
                                                                             window_server):
    server, handler = window_server
    engine = engine_for(provider, server.url, ContextLimits())  # believes 128k
    notes = condense_with_shrink(engine, SQ, PAGE)
    assert handler.overflows == 1  # the first call taught the window; pieces then fit
    assert handler.successes >= 2  # condensed in pieces
    paragraphs = {int(n) for n in re.findall(r"Waiting example (\d+)-", notes)}
    assert min(paragraphs) == 0 and max(paragraphs) >= 70  # the head and the tail of the page
    # Still verbatim: every line but the model's one-line notes "(...)" is the page's text.
    assert all(line in PAGE.text for line in notes.splitlines() if not line.startswith("("))


def test_a_known_window_costs_no_failed_call(provider, window_server):
    server, handler = window_server
    model = SPECS[provider][0].split(":", 1)[1]
    engine = engine_for(provider, server.url, ContextLimits({model: 6_000}))
    plan = plan_with_shrink(engine, Topic(text="Threading or asyncio for waiting on sockets"))
    notes = condense_with_shrink(engine, SQ, PAGE)
    assert plan.subquestions and notes
    assert handler.overflows == 0


def test_an_output_side_overflow_lowers_the_cap_and_keeps_the_prompt(provider):
    handler = WindowEnforcingHandler(provider, 4_500, respond=responder(provider))
    with ScriptedServer(default=handler) as server:
        engine = engine_for(provider, server.url, ContextLimits())
        plan = plan_with_shrink(engine, Topic(text="Threading or asyncio for waiting on sockets"))
    assert plan.subquestions
    assert handler.overflows <= 1 and handler.successes >= 1
    first_input = handler.seen[0][0]
    assert all(seen[0] == first_input for seen in handler.seen)  # the prompt was never cut


def test_follow_up_queries_fit_long_notes(provider, window_server):
    server, handler = window_server
    engine = engine_for(provider, server.url, ContextLimits())
    transcript = Transcript(subquestion=SQ, queries_run=["threading asyncio waiting"])
    for i, piece in enumerate(PAGE.text.split("\n\n")[:40]):
        call = ToolCall(id=f"r0f{i}", name="read", arguments={"url": PAGE.url})
        transcript.messages += [Message(role="assistant", content="", tool_calls=(call,)),
                                Message(role="tool", tool_call_id=call.id, name="read",
                                        content=f"Source: {PAGE.title} <{PAGE.url}>\n{piece}")]
    queries = queries_with_shrink(engine, transcript, 1)
    assert queries == ["asyncio waiting details"]
    assert handler.overflows <= 1


def test_a_truncated_answer_is_asked_again_at_the_same_cap_with_a_stricter_instruction():
    """A cut-off answer is a model that ran long (or looped inside a string): a larger cap
    would only let it run longer. It is asked once more, at the same cap, told to be brief,
    without its cut answer sent back."""
    from tests.fakes import providers as fake
    from tests.fakes.http import Reply
    from tests.fakes.research_provider import answer

    topic = Topic(text="Threading or asyncio for waiting on sockets")
    with ScriptedServer() as server:
        engine = engine_for("openai", server.url, ContextLimits({"gpt-4o-mini": 20_000}))
        engine.max_output_tokens = 300

        def full(rec):
            return fake.success_reply("openai", answer("plan", "openai", rec.json()))

        server.push(Reply(body=fake.openai_completion('{"brief": "cut he', finish_reason="length")),
                    full)
        plan = plan_with_shrink(engine, topic)
        sent = [r.json() for r in server.requests]
    assert plan.subquestions
    assert [s["max_tokens"] for s in sent] == [300, 300]
    second = sent[1]["messages"]
    assert "cut off" in second[-1]["content"] and "briefly" in second[-1]["content"]
    assert not any("cut he" in (m.get("content") or "") for m in second)


def test_a_role_asks_for_what_its_answer_needs_not_a_share_of_the_window():
    """On a large window the plan asks for its bounded answer's need, not half the window; the
    schema it sends bounds every string and list (a grammar-constrained server cannot loop)."""
    from tests.fakes import providers as fake
    from tests.fakes.research_provider import answer

    from core.engine.model_driven.calls import ROLE_OUTPUT_TOKENS

    topic = Topic(text="Threading or asyncio for waiting on sockets", max_subquestions=4)
    with ScriptedServer() as server:
        engine = engine_for("openai", server.url, ContextLimits({"gpt-4o-mini": 128_000}))
        server.push(lambda rec: fake.success_reply("openai", answer("plan", "openai", rec.json())))
        plan_with_shrink(engine, topic)
        sent = server.requests[0].json()
    assert sent["max_tokens"] == ROLE_OUTPUT_TOKENS["plan"]
    schema = sent["response_format"]["json_schema"]["schema"]
    subquestions = schema["properties"]["subquestions"]
    assert (subquestions["minItems"], subquestions["maxItems"]) == (3, 4)
    assert schema["properties"]["brief"]["maxLength"] == 400
    question = schema["$defs"]["PlannedSubQuestion"]["properties"]
    assert question["question"]["maxLength"] == 200
    assert question["queries"]["items"]["maxLength"] == 80
