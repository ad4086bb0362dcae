"""Reasoning and thinking models, through the real SDKs against loopback fakes.

What a model accepts is learned from its own 400s (`core.llm.quirks`), not only guessed from its
name; thinking is asked for with the answer's budget plus the thinking allowance as the cap;
truncation is never silent; long outputs stream, with errors inside a stream still classified;
the read timeout grows with the output cap. Every assertion reads what the fake provider was
sent or what came back through the SDK.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import pytest

from core.llm.anthropic import MIN_THINKING_BUDGET
from core.llm.base import ChatModel, Completion, SDKBackend, Usage
from core.llm.gemini import DEFAULT_THINKING_ALLOWANCE
from core.llm.openai import REASONING_ALLOWANCE
from core.llm.quirks import QUIRKS, fix_for
from core.llm.registry import make_model
from core.models import Message
from core.overflow.signals import ContextOverflow, Fatal, RateLimited, Signal, Transient
from core.settings import Settings
from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply, ScriptedServer

API_KEY = "sk-reasoning-test-0123456789abcdef"
PROMPT = [Message(role="system", content="Be brief."), Message(role="user", content="Why?")]
SCHEMA = {"title": "Answer", "type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"]}
SUFFIX = {"openai": "/v1", "anthropic": "", "gemini": ""}
# google-genai lets transport errors (timeouts) through as httpx2's own exceptions.
SDK_MODULES = {"openai": ("openai",), "anthropic": ("anthropic",),
               "gemini": ("google.genai", "httpx2")}


@pytest.fixture(autouse=True)
def _fresh_quirks() -> Any:
    QUIRKS.clear()  # what one test taught must not shape the next one's requests
    yield
    QUIRKS.clear()


def make(spec: str, url: str, *, settings: dict[str, Any] | None = None,
         **options: Any) -> SDKBackend:
    provider = spec.split(":", 1)[0]
    base = url + SUFFIX.get(provider, "/v1")
    s = Settings(_env_file=None, request_timeout=10, openai_api_key=API_KEY,
                 anthropic_api_key=API_KEY, gemini_api_key=API_KEY, openai_base_url=base,
                 anthropic_base_url=base, gemini_base_url=base, **(settings or {}))
    model = make_model(spec, s, **options)
    assert isinstance(model, SDKBackend)
    return model


def bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests]


def gen_config(body: dict[str, Any]) -> dict[str, Any]:
    return body.get("generationConfig") or {}


def thinking_budget_sent(body: dict[str, Any]) -> int | None:
    """generationConfig.thinkingConfig's budget. google-genai sends the nested keys in snake
    case ("thinking_budget"), which the API's proto-JSON parser accepts beside camel case."""
    config = gen_config(body).get("thinkingConfig")
    if config is None:
        return None
    return config.get("thinkingBudget", config.get("thinking_budget"))


def expect(exc: BaseException, cls: type[Signal], wire: str) -> Signal:
    assert isinstance(exc, cls), f"expected {cls.__name__}, got {exc!r}"
    assert type(exc.__cause__).__module__.startswith(SDK_MODULES[wire]), exc.__cause__
    return exc


def raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects whatever came out
        return exc
    pytest.fail("the call did not raise")


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


# --- 3. truncation is never silent -----------------------------------------------------------

TRUNCATIONS = [("openai", "length"), ("anthropic", "max_tokens"), ("gemini", "MAX_TOKENS")]
SPECS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-sonnet-4-5",
         "gemini": "gemini:gemini-2.0-flash"}


def _reply(wire: str, text: str, finish: str, *, stream: bool) -> Reply:
    if wire == "openai":
        return Reply(sse=fake.openai_sse(text, finish_reason=finish)) if stream \
            else Reply(body=fake.openai_completion(text, finish_reason=finish))
    if wire == "anthropic":
        return Reply(sse=fake.anthropic_sse(text, stop_reason=finish)) if stream \
            else Reply(body=fake.anthropic_message(text, stop_reason=finish))
    return Reply(sse=fake.gemini_sse(text, finish_reason=finish)) if stream \
        else Reply(body=fake.gemini_response(text, finish_reason=finish))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("wire, finish", TRUNCATIONS, ids=[w for w, _ in TRUNCATIONS])
def test_truncation_is_reported(server: ScriptedServer, wire: str, finish: str,
                                stream: bool) -> None:
    server.push(_reply(wire, "cut off mid-sent", finish, stream=stream),
                _reply(wire, "complete.", {"openai": "stop", "anthropic": "end_turn",
                                           "gemini": "STOP"}[wire], stream=stream))
    model = make(SPECS[wire], server.url, stream_above=10 if stream else 1_000_000)

    cut = model.complete(PROMPT, max_tokens=50)
    whole = model.complete(PROMPT, max_tokens=50)

    assert (cut.text, cut.finish_reason, cut.truncated) == ("cut off mid-sent", finish, True)
    assert (whole.text, whole.truncated) == ("complete.", False)
    assert bool(bodies(server)[0].get("stream")) == (stream and wire != "gemini")


@pytest.mark.parametrize("reason", ["length", "LENGTH", "max_tokens", "MAX_TOKENS",
                                    "model_context_window_exceeded"])
def test_truncated_any_case(reason: str) -> None:
    assert Completion("", "m", finish_reason=reason).truncated
    assert not Completion("", "m", finish_reason="STOP").truncated
    assert not Completion("", "m").truncated


def test_gemini_thoughts_are_not_text_and_a_cap_spent_thinking_is_truncation(
        server: ScriptedServer) -> None:
    body = fake.gemini_response("", finish_reason="MAX_TOKENS", output_tokens=0, thoughts=500)
    body["candidates"][0]["content"]["parts"] = [{"text": "pondering", "thought": True}]
    server.push(Reply(body=body))

    out = make("gemini:gemini-2.5-flash", server.url).complete(PROMPT, max_tokens=20)

    assert (out.text, out.truncated) == ("", True)
    assert out.usage == Usage(10, 500, None, 500)


# --- 4. long outputs stream, on every provider -----------------------------------------------

def _long_reply(wire: str, text: str) -> Reply:
    if wire == "openai":
        return Reply(sse=fake.openai_sse(text, prompt_tokens=30, completion_tokens=900,
                                         reasoning_tokens=600))
    if wire == "anthropic":
        return Reply(sse=fake.anthropic_sse(text, input_tokens=30, output_tokens=900,
                                            thinking_tokens=600))
    return Reply(sse=fake.gemini_sse(text, prompt_tokens=30, output_tokens=300, thoughts=600,
                                     thought_text="private musing"))


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_a_long_output_streams_and_is_collected(server: ScriptedServer, wire: str) -> None:
    spec = {"openai": "openai:gpt-4.1", "anthropic": "anthropic:claude-sonnet-4-5",
            "gemini": "gemini:gemini-2.0-flash"}[wire]
    server.push(_long_reply(wire, "A long report, streamed."))
    model = make(spec, server.url)

    out = model.complete(PROMPT, max_tokens=20_000)  # above the default threshold (16,384)

    request = server.requests[0]
    if wire == "gemini":
        assert request.path.endswith(":streamGenerateContent?alt=sse")
    else:
        assert request.json()["stream"] is True
    assert out.text == "A long report, streamed."  # Gemini's thought part is left out
    assert out.usage == Usage(30, 900, None, 600)  # usage is still read from the stream
    assert not out.truncated


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_a_short_output_does_not_stream(server: ScriptedServer, wire: str) -> None:
    server.push(fake.success_reply(wire, "short"))  # a whole JSON reply
    out = make(SPECS[wire], server.url).complete(PROMPT, max_tokens=1_000)
    assert out.text == "short"
    assert "stream" not in server.requests[0].json()
    assert server.requests[0].path.endswith((":generateContent", "/messages",
                                             "/chat/completions"))


def test_thinking_counts_towards_the_streaming_threshold(server: ScriptedServer) -> None:
    server.push(Reply(sse=fake.anthropic_sse("ok")))
    model = make("anthropic:claude-sonnet-4-5", server.url, settings={"thinking_budget": 12_000})
    model.complete(PROMPT, max_tokens=8_000)  # 8,000 + 12,000 thinking > 16,384
    body = server.requests[0].json()
    assert body["stream"] is True and body["max_tokens"] == 20_000


STREAM_ERRORS: list[tuple[str, Callable[[], Reply], type[Signal]]] = [
    ("openai", lambda: Reply(sse=fake.openai_sse_error(
        fake.overflow_body("openai", 1_000, 2_000), after="partial")), ContextOverflow),
    ("anthropic", lambda: Reply(sse=fake.anthropic_sse_error(
        {"type": "overloaded_error", "message": "Overloaded"}, after="partial")), RateLimited),
    ("anthropic", lambda: Reply(sse=fake.anthropic_sse_error(
        {"type": "api_error", "message": "Internal server error"})), Transient),
    ("gemini", lambda: Reply(sse=fake.gemini_sse_error(
        500, "An internal error has occurred. Please retry.", after="partial")), Transient),
    ("gemini", lambda: Reply(sse=fake.gemini_sse_error(
        429, "Resource has been exhausted (e.g. check quota).")), RateLimited),
]


@pytest.mark.parametrize("wire, reply, signal", STREAM_ERRORS,
                         ids=[f"{w}-{s.__name__}" for w, _, s in STREAM_ERRORS])
def test_an_error_inside_a_stream_is_classified(server: ScriptedServer, wire: str,
                                                reply: Callable[[], Reply],
                                                signal: type[Signal]) -> None:
    server.push(reply(), _reply(wire, "never fetched", "stop", stream=True))
    model = make(SPECS[wire], server.url, stream_above=100)

    exc = raised(lambda: model.complete(PROMPT, max_tokens=500))

    expect(exc, signal, wire)
    assert len(server.requests) == 1  # a stream error is not a parameter to learn: no repeat


# --- 5. the read timeout grows with the output cap -------------------------------------------

def test_read_timeout_scales_with_the_cap() -> None:
    model = make("openai:gpt-4o-mini", "http://127.0.0.1:9", timeout=60)
    assert model.read_timeout(100) == 60  # short outputs: the configured timeout
    assert model.read_timeout(4_096) == pytest.approx(30 + 4_096 / 25)
    assert model.read_timeout(20_000) == pytest.approx(830)
    assert make("openai:gpt-4o-mini", "http://127.0.0.1:9", timeout=60,
                min_output_rate=None).read_timeout(20_000) == 60


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_a_slow_long_reply_outlives_the_configured_timeout(server: ScriptedServer,
                                                           wire: str) -> None:
    def slow(rec: Recorded) -> Reply:
        time.sleep(0.5)
        return fake.success_reply(wire, "worth the wait")

    server.push(slow, slow)
    # 0.2 s configured; a 200-token cap at 100 tokens/s earns 30 s + 2 s of reading time
    patient = make(SPECS[wire], server.url, timeout=0.2, min_output_rate=100.0)
    strict = make(SPECS[wire], server.url, timeout=0.2, min_output_rate=None)

    assert patient.complete(PROMPT, max_tokens=200).text == "worth the wait"
    expect(raised(lambda: strict.complete(PROMPT, max_tokens=200)), Transient, wire)
    body = server.requests[0].json()
    assert "timeout" not in body and "httpOptions" not in gen_config(body)  # SDK-side only


def test_output_cap_is_what_a_call_sends() -> None:
    assert make("openai:gpt-4o-mini", "http://x").output_cap(500) == 500
    assert make("openai:o3", "http://x").output_cap(500) == 500 + REASONING_ALLOWANCE["medium"]
    assert make("gemini:gemini-2.5-flash", "http://x").output_cap(500) \
        == 500 + DEFAULT_THINKING_ALLOWANCE
    assert make("gemini:gemini-2.5-flash-lite", "http://x").output_cap(500) == 500
    assert make("anthropic:claude-haiku-4-5", "http://x",
                settings={"thinking_budget": 2_000}).output_cap(500) == 2_500
    chat: ChatModel = make("anthropic:claude-haiku-4-5", "http://x")
    assert isinstance(chat, ChatModel)


def test_anthropic_streams_where_its_sdk_refuses_long_unstreamed_replies(
        server: ScriptedServer) -> None:
    # The SDK caps unstreamed output at 8,192 tokens for the Opus 4 snapshots.
    server.push(Reply(sse=fake.anthropic_sse("ok")), fake.success_reply("anthropic", "ok"))
    model = make("anthropic:claude-opus-4-20250514", server.url)
    model.complete(PROMPT, max_tokens=10_000)
    model.complete(PROMPT, max_tokens=8_000)
    long, short = bodies(server)
    assert long["stream"] is True and "stream" not in short


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
