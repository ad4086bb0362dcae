"""Reasoning and thinking models, through the real SDKs against loopback fakes.

What a model accepts is learned from its own 400s (`core.llm.quirks`), not only guessed from its
name; thinking is asked for with the answer's budget plus the thinking allowance as the cap; the
refusals are understood as each provider words them. Long outputs (truncation, streaming, the
read timeout) are in test_long_outputs.py. Every assertion reads what the fake provider was sent
or what came back through the SDK.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.llm.anthropic import MIN_THINKING_BUDGET
from core.llm.base import SDKBackend
from core.llm.gemini import DEFAULT_THINKING_ALLOWANCE
from core.llm.openai import REASONING_ALLOWANCE
from core.llm.quirks import fix_for
from core.llm.registry import make_model
from core.signals import Fatal
from core.settings import Settings
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer
from tests.contract.llm_wire import (API_KEY, PROMPT, SCHEMA, bodies, expect, gen_config, make,
                                     raised, thinking_budget_sent)


# --- 1. the supported form, learned from the API's own 400 -----------------------------------

def test_openai_unknown_model_refusing_max_tokens_switches_once(server: ScriptedServer) -> None:
    server.push(fake.unsupported_param_reply("openai", "max_tokens"),
                fake.success_reply("openai", "first"), fake.success_reply("openai", "second"))
    model = make("openai:acme-thinker-7", server.url)

    first = model.complete(PROMPT, max_tokens=300)
    second = model.complete(PROMPT, max_tokens=300)

    assert (first.text, second.text) == ("first", "second")
    refused, retried, direct = bodies(server)
    assert refused["max_tokens"] == 300 and "max_completion_tokens" not in refused
    for body in (retried, direct):  # the supported form, reasoning room included
        assert "max_tokens" not in body
        assert body["max_completion_tokens"] == 300 + REASONING_ALLOWANCE["medium"]
    assert len(server.requests) == 3  # one 400 in all: the third call went out right at once
    # another model of the same provider is not affected
    server.push(fake.success_reply("openai", "ok"))
    make("openai:acme-chat-1", server.url).complete(PROMPT, max_tokens=50)
    assert bodies(server)[-1]["max_tokens"] == 50


def test_openai_unknown_model_refusing_temperature_keeps_the_default(
        server: ScriptedServer) -> None:
    server.push(fake.unsupported_param_reply("openai", "temperature"),
                fake.success_reply("openai", "first"), fake.success_reply("openai", "second"))
    model = make("openai:gpt-6-sol", server.url)

    assert model.complete(PROMPT, max_tokens=120).text == "first"
    assert model.complete(PROMPT, max_tokens=120).text == "second"

    refused, retried, direct = bodies(server)
    assert refused["temperature"] == 0.0
    for body in (retried, direct):
        assert "temperature" not in body
        assert body["max_tokens"] == 120  # only what the API refused changes
    assert len(server.requests) == 3


def test_a_new_reasoning_model_is_taught_both_refusals_within_one_call(
        server: ScriptedServer) -> None:
    server.push(fake.unsupported_param_reply("openai", "max_tokens"),
                fake.unsupported_param_reply("openai", "temperature"),
                fake.success_reply("openai", "answer"), fake.success_reply("openai", "again"))
    model = make("openai:acme-thinker-8", server.url)

    assert model.complete(PROMPT, max_tokens=64).text == "answer"
    assert model.complete(PROMPT, max_tokens=64).text == "again"

    sent = bodies(server)
    assert len(sent) == 4
    assert "temperature" not in sent[2] and "max_tokens" not in sent[2]
    assert sent[3] == sent[2]  # the next call starts in the learned form


def test_reasoning_effort_refused_is_dropped(server: ScriptedServer) -> None:
    server.push(fake.unsupported_param_reply("openai", "reasoning_effort"),
                fake.success_reply("openai", "ok"), fake.success_reply("openai", "ok"))
    model = make("openai:acme-chat-2", server.url, settings={"reasoning_effort": "low"})

    model.complete(PROMPT, max_tokens=40)
    model.complete(PROMPT, max_tokens=40)

    refused, retried, direct = bodies(server)
    assert refused["reasoning_effort"] == "low"
    assert "reasoning_effort" not in retried and "reasoning_effort" not in direct


def test_a_refusal_of_what_was_not_sent_is_not_retried(server: ScriptedServer) -> None:
    # o3-mini is guessed to be a reasoning model: no temperature goes out, so a 400 naming it
    # cannot be fixed by dropping it; it stays a Fatal, after one request.
    server.push(fake.unsupported_param_reply("openai", "temperature"),
                fake.success_reply("openai", "never fetched"))
    model = make("openai:o3-mini", server.url)

    exc = raised(lambda: model.complete(PROMPT, max_tokens=10))

    assert len(server.requests) == 1
    assert expect(exc, Fatal, "openai").reason == "bad_request"


def test_other_bad_requests_are_not_retried(server: ScriptedServer) -> None:
    server.push(Reply(400, fake.error_body("openai", 400, "Invalid 'messages[0].role': "
                                           "expected one of system, user.",
                                           param="messages[0].role", code="invalid_value")),
                fake.success_reply("openai", "never fetched"))

    exc = raised(lambda: make("openai:acme-chat-3", server.url).complete(PROMPT, max_tokens=10))

    assert len(server.requests) == 1
    assert expect(exc, Fatal, "openai").reason == "bad_request"


def test_anthropic_model_without_thinking_is_asked_without_it(server: ScriptedServer) -> None:
    server.push(fake.unsupported_param_reply("anthropic", "thinking", model="claude-3-5-haiku"),
                fake.success_reply("anthropic", "first"), fake.success_reply("anthropic", "2nd"))
    model = make("anthropic:claude-3-5-haiku", server.url, settings={"thinking_budget": 2_048})

    assert model.complete(PROMPT, max_tokens=500).text == "first"
    assert model.complete(PROMPT, max_tokens=500).text == "2nd"

    refused, retried, direct = bodies(server)
    assert refused["thinking"] == {"type": "enabled", "budget_tokens": 2_048}
    assert refused["max_tokens"] == 500 + 2_048
    for body in (retried, direct):
        assert "thinking" not in body and body["max_tokens"] == 500  # no room needed now


def test_anthropic_adaptive_only_model_gets_adaptive_thinking(server: ScriptedServer) -> None:
    server.push(fake.unsupported_param_reply("anthropic", "thinking.type.enabled"),
                fake.success_reply("anthropic", "ok"), fake.success_reply("anthropic", "ok"))
    model = make("anthropic:claude-opus-5", server.url, settings={"thinking_budget": 4_000})

    model.complete(PROMPT, max_tokens=1_000)
    model.complete(PROMPT, max_tokens=1_000)

    refused, retried, direct = bodies(server)
    assert refused["thinking"]["type"] == "enabled"
    assert retried["thinking"] == direct["thinking"] == {"type": "adaptive"}
    assert retried["max_tokens"] == 1_000 + 4_000  # thinking still counts against max_tokens


@pytest.mark.parametrize("param", ["thinking", "thinking_budget"])
def test_gemini_model_refusing_thinking_config_is_asked_without_it(server: ScriptedServer,
                                                                    param: str) -> None:
    server.push(fake.unsupported_param_reply("gemini", param),
                fake.success_reply("gemini", "ok"), fake.success_reply("gemini", "ok"))
    model = make("gemini:gemini-2.0-flash", server.url, settings={"thinking_budget": 512})

    model.complete(PROMPT, max_tokens=200)
    model.complete(PROMPT, max_tokens=200)

    refused, retried, direct = bodies(server)
    assert thinking_budget_sent(refused) == 512
    assert gen_config(refused)["maxOutputTokens"] == 200 + 512
    for body in (retried, direct):
        assert "thinkingConfig" not in gen_config(body)
        assert gen_config(body)["maxOutputTokens"] == 200


# --- 2. reasoning and thinking parameters, with the caps summed ------------------------------

def test_openai_reasoning_effort_and_its_allowance(server: ScriptedServer) -> None:
    server.push(fake.success_reply("openai", "ok"), fake.success_reply("openai", "ok"))
    make("openai:o3-mini", server.url, settings={"reasoning_effort": "high"}).complete(
        PROMPT, max_tokens=300)
    make("openai:o4-mini", server.url, settings={"thinking_budget": 3_000}).complete(
        PROMPT, max_tokens=300)

    effort, budgeted = bodies(server)
    assert effort["reasoning_effort"] == "high"
    assert effort["max_completion_tokens"] == 300 + REASONING_ALLOWANCE["high"]
    assert "temperature" not in effort and "max_tokens" not in effort
    assert "reasoning_effort" not in budgeted  # not set: the model's default
    assert budgeted["max_completion_tokens"] == 300 + 3_000


def test_openai_non_reasoning_model_gets_only_the_answer_budget(server: ScriptedServer) -> None:
    server.push(fake.success_reply("openai", "ok"))
    make("openai:gpt-4.1", server.url).complete(PROMPT, max_tokens=300)
    body = bodies(server)[0]
    assert body["max_tokens"] == 300 and body["temperature"] == 0.0


def test_anthropic_extended_thinking_adds_its_budget(server: ScriptedServer) -> None:
    server.push(fake.success_reply("anthropic", "ok"), fake.success_reply("anthropic", "ok"))
    make("anthropic:claude-sonnet-4-5", server.url,
         settings={"thinking_budget": 3_000}).complete(PROMPT, max_tokens=800)
    make("anthropic:claude-sonnet-4-5", server.url,
         settings={"thinking_budget": 100}).complete(PROMPT, max_tokens=800)

    chosen, raised_to_minimum = bodies(server)
    assert chosen["thinking"] == {"type": "enabled", "budget_tokens": 3_000}
    assert chosen["max_tokens"] == 800 + 3_000 and "temperature" not in chosen
    assert raised_to_minimum["thinking"]["budget_tokens"] == MIN_THINKING_BUDGET
    assert raised_to_minimum["max_tokens"] == 800 + MIN_THINKING_BUDGET


def test_anthropic_thinking_cap_stays_within_the_models_output_limit(
        server: ScriptedServer) -> None:
    server.push(Reply(sse=fake.anthropic_sse("ok")))  # 64,000 tokens: a streamed call
    model = make("anthropic:claude-sonnet-4-5", server.url, settings={"thinking_budget": 10_000})
    model.complete(PROMPT, max_tokens=60_000)
    body = bodies(server)[0]
    assert body["max_tokens"] == 64_000  # the published limit of Sonnet 4.5
    assert body["thinking"]["budget_tokens"] == 4_000  # the thinking shrinks, not the answer


def test_anthropic_structured_output_with_thinking_offers_the_tool(
        server: ScriptedServer) -> None:
    server.push(fake.success_reply("anthropic", '{"answer": "because"}', json_tool=True))
    model = make("anthropic:claude-sonnet-4-5", server.url, settings={"thinking_budget": 2_000})

    out = model.complete(PROMPT, max_tokens=300, json_schema=SCHEMA)

    body = bodies(server)[0]
    assert json.loads(out.text) == {"answer": "because"}
    assert body["tool_choice"] == {"type": "auto"}  # a forced tool is refused with thinking
    assert body["tools"][0]["name"] == "emit" and "`emit` tool" in body["system"]
    assert "Be brief." in body["system"]


def test_gemini_thinking_budget_and_default_allowance(server: ScriptedServer) -> None:
    server.push(*(fake.success_reply("gemini", "ok") for _ in range(3)))
    make("gemini:gemini-2.5-flash", server.url,
         settings={"thinking_budget": 1_024}).complete(PROMPT, max_tokens=400)
    make("gemini:gemini-2.5-pro", server.url).complete(PROMPT, max_tokens=400)
    make("gemini:gemini-2.0-flash", server.url).complete(PROMPT, max_tokens=400)

    assert thinking_budget_sent(bodies(server)[0]) == 1_024
    budgeted, default, plain = (gen_config(b) for b in bodies(server))
    assert budgeted["maxOutputTokens"] == 400 + 1_024
    assert "thinkingConfig" not in default  # 2.5 Pro thinks by default: room is left for it
    assert default["maxOutputTokens"] == 400 + DEFAULT_THINKING_ALLOWANCE
    assert plain["maxOutputTokens"] == 400 and plain["temperature"] == 0.0


def test_gemini_model_seen_thinking_unasked_gets_room_from_then_on(
        server: ScriptedServer) -> None:
    server.push(Reply(body=fake.gemini_response("ok", model="gemini-2.0-flash", thoughts=600)),
                fake.success_reply("gemini", "ok"))
    model = make("gemini:gemini-2.0-flash", server.url)

    model.complete(PROMPT, max_tokens=100)
    model.complete(PROMPT, max_tokens=100)

    first, second = (gen_config(b) for b in bodies(server))
    assert first["maxOutputTokens"] == 100
    # room for thinking, within 2.0 Flash's published 8,192-token output limit
    assert second["maxOutputTokens"] == model.output_cap(100) == 8_192


@pytest.mark.parametrize("name", ["gemini-3-pro-preview", "gemini-3.1-flash-lite",
                                  "models/gemini-3.5-flash"])
def test_gemini_3_keeps_its_default_temperature(server: ScriptedServer, name: str) -> None:
    server.push(fake.success_reply("gemini", "ok"))
    make(f"gemini:{name}", server.url).complete(PROMPT, max_tokens=100, temperature=0.0)
    config = gen_config(bodies(server)[0])
    assert "temperature" not in config  # Google: keep Gemini 3 at its default of 1.0
    assert config["maxOutputTokens"] == 100 + DEFAULT_THINKING_ALLOWANCE  # it thinks too


def test_reasoning_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESEARCHFLOW_REASONING_EFFORT", "minimal")
    monkeypatch.setenv("RESEARCHFLOW_THINKING_BUDGET", "2048")
    settings = Settings(_env_file=None, openai_api_key=API_KEY, anthropic_api_key=API_KEY)
    assert (settings.reasoning_effort, settings.thinking_budget) == ("minimal", 2_048)
    model = make_model("openai:o3", settings)
    assert isinstance(model, SDKBackend)
    assert (model.reasoning_effort, model.thinking_budget) == ("minimal", 2_048)
    assert model.output_cap(1_000) == 1_000 + 2_048
    assert make_model("anthropic:claude-sonnet-4-5", settings).thinking_budget == 2_048
    monkeypatch.setenv("RESEARCHFLOW_REASONING_EFFORT", "extreme")
    with pytest.raises(ValueError):
        Settings(_env_file=None)


# --- the refusals understood, as each provider words them ------------------------------------

class _Refusal(Exception):
    """Stands in for an SDK error: the fields `fix_for` reads (status, body, param, code)."""

    def __init__(self, status: int, body: Any, **fields: Any) -> None:
        super().__init__(str(body))
        self.status_code, self.body = status, body
        for name, value in fields.items():
            setattr(self, name, value)


def _msg(text: str) -> dict[str, Any]:
    return {"error": {"message": text}}


REFUSALS = [
    (_Refusal(400, _msg("Unsupported parameter: 'max_tokens' is not supported with this model. "
                        "Use 'max_completion_tokens' instead."), param="max_tokens",
              code="unsupported_parameter"), "max_completion_tokens"),
    (_Refusal(400, _msg("max_tokens is not supported by this model, use max_completion_tokens")),
     "max_completion_tokens"),  # a compatible server's wording: the first name mentioned
    (_Refusal(400, _msg("Unrecognized request argument supplied: max_completion_tokens")),
     "max_tokens"),
    (_Refusal(400, _msg("Unsupported value: 'temperature' does not support 0.0 with this model. "
                        "Only the default (1) value is supported."), param="temperature",
              code="unsupported_value"), "no_temperature"),
    (_Refusal(400, _msg("Unsupported value: 'reasoning_effort' does not support 'minimal' with "
                        "this model."), param="reasoning_effort", code="unsupported_value"),
     "no_reasoning_effort"),
    (_Refusal(400, _msg("`top_p` is deprecated for this model.")), "no_top_p"),
    (_Refusal(400, _msg("`temperature` is deprecated for this model.")), "no_temperature"),
    (_Refusal(400, _msg("'claude-3-5-haiku-20241022' does not support thinking.")),
     "no_thinking"),
    (_Refusal(400, _msg('"thinking.type.enabled" is not supported for this model. Use '
                        '"thinking.type.adaptive" and "output_config.effort" to control '
                        "thinking behavior.")), "adaptive_thinking"),
    (_Refusal(400, _msg("Budget 0 is invalid. This model only works in thinking mode.")),
     "no_thinking"),
    (_Refusal(400, _msg("Unable to submit request because thinking is not configurable in this "
                        "model; please remove the thinking_config setting and try it again.")),
     "no_thinking"),
    # not refusals of a parameter: nothing to learn
    (_Refusal(400, _msg("The thinking budget (52428) is invalid.")), None),
    (_Refusal(400, _msg("max_tokens: 100000 > 64000, which is the maximum allowed number of "
                        "output tokens for claude-sonnet-4-5")), None),
    (_Refusal(400, _msg("Thinking may not be enabled when tool_choice forces tool use.")), None),
    (_Refusal(429, _msg("Unsupported parameter: 'temperature'")), None),
    (None, None),
]


@pytest.mark.parametrize("exc, fix", REFUSALS)
def test_refusals_are_read_from_fields_then_text(exc: BaseException | None,
                                                 fix: str | None) -> None:
    assert fix_for(exc) == fix
