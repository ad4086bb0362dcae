"""Long outputs, through the real SDKs against loopback fakes: truncation is never silent;
long outputs stream on every provider, with errors inside a stream still classified; the read
timeout grows with the output cap. Every assertion reads what the fake provider was sent or what
came back through the SDK.
"""

from __future__ import annotations

import time
from typing import Callable

import pytest

from core.llm.base import ChatModel, Completion, Usage
from core.llm.gemini import DEFAULT_THINKING_ALLOWANCE
from core.llm.openai import REASONING_ALLOWANCE
from core.signals import ContextOverflow, RateLimited, Signal, Transient
from tests.fakes import providers as fake
from tests.fakes.http import Recorded, Reply, ScriptedServer
from tests.contract.llm_wire import PROMPT, bodies, expect, gen_config, make, raised


# --- 1. truncation is never silent -----------------------------------------------------------

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


# --- 2. long outputs stream, on every provider -----------------------------------------------

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


# --- 3. the read timeout grows with the output cap -------------------------------------------

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


