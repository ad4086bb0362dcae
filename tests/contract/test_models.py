"""The contract every chat model backend passes: the real SDK against a loopback fake provider.

Each backend is built through `make_model` (so the registry wiring is under test too) and pointed
at a `ScriptedServer` speaking its provider's wire format. Assertions read what the server was
actually sent, and what came back through the SDK: nothing here checks a mock's own answers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from core.llm.base import ChatModel, Completion
from core.llm.openai import REASONING_ALLOWANCE
from core.llm.registry import make_model
from core.models import Message, ToolCall
from core.settings import Settings
from core.signals import ContextOverflow, Fatal, RateLimited, Signal, Transient
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer
from tests.contract.llm_wire import raised

API_KEY = "sk-contract-SECRET-0123456789abcdef"
# google-genai lets transport errors (timeouts) through as httpx2's own exceptions.
SDK_MODULES = {"openai": ("openai",), "anthropic": ("anthropic",),
               "gemini": ("google.genai", "httpx2")}


@dataclass(frozen=True)
class Backend:
    id: str
    spec: str
    wire: fake.Provider
    url_suffix: str = ""
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def stream(self) -> bool:
        return dict(self.options).get("stream", False)

    def make(self, url: str, **options: Any) -> ChatModel:
        base = url + self.url_suffix
        settings = Settings(_env_file=None, request_timeout=10, openai_api_key=API_KEY,
                            anthropic_api_key=API_KEY, gemini_api_key=API_KEY,
                            openai_base_url=base, anthropic_base_url=base, gemini_base_url=base)
        return make_model(self.spec, settings, **(dict(self.options) | options))


BACKENDS = [
    Backend("openai", "openai:gpt-4o-mini", "openai", "/v1"),
    Backend("openai-stream", "openai:gpt-4o-mini", "openai", "/v1", (("stream", True),)),
    Backend("anthropic", "anthropic:claude-sonnet-4-5", "anthropic"),
    Backend("gemini", "gemini:gemini-2.5-flash", "gemini"),
]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.id)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


# --- reading the recorded request, per wire format -------------------------------------------

def roles(wire: str, body: dict[str, Any]) -> list[str]:
    key = "contents" if wire == "gemini" else "messages"
    return [m["role"] for m in body[key]]


def system_text(wire: str, body: dict[str, Any]) -> str:
    if wire == "openai":
        return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
    if wire == "anthropic":
        return body.get("system", "")
    return " ".join(p["text"] for p in body.get("systemInstruction", {}).get("parts", []))


def max_tokens_sent(wire: str, body: dict[str, Any]) -> int:
    if wire == "gemini":
        return body["generationConfig"]["maxOutputTokens"]
    return body["max_tokens"]


def structured_output_sent(wire: str, body: dict[str, Any], schema: dict[str, Any]) -> bool:
    if wire == "openai":
        fmt = body.get("response_format", {})
        return fmt.get("type") == "json_schema" and fmt["json_schema"]["schema"] == schema
    if wire == "anthropic":
        return (body.get("tool_choice") == {"type": "tool", "name": "emit"}
                and body["tools"][0]["input_schema"] == schema)
    config = body.get("generationConfig", {})
    return (config.get("responseMimeType") == "application/json"
            and config.get("responseJsonSchema") == schema)


def ok(backend: Backend, text: str, **kw: Any) -> Reply:
    return fake.success_reply(backend.wire, text, stream=backend.stream, **kw)


def sdk_exception(exc: BaseException) -> BaseException:
    """The SDK's own exception: the signal's cause (or, before classify lands, its context)."""
    inner = exc.__cause__ or exc.__context__
    assert inner is not None, f"{exc!r} does not chain the SDK exception"
    return inner


def expect_signal(exc: BaseException, cls: type[Signal], wire: str) -> Signal:
    if isinstance(exc, NotImplementedError):
        pytest.xfail("core.signals.classify is not implemented yet")
    assert isinstance(exc, cls), f"expected {cls.__name__}, got {exc!r}"
    assert exc.__cause__ is not None
    assert type(exc.__cause__).__module__.startswith(SDK_MODULES[wire]), exc.__cause__
    return exc


TRANSCRIPT = [
    Message(role="system", content="You are a careful researcher."),
    Message(role="user", content="What does PEP 8 say about line length?"),
    Message(role="assistant", content="Let me search.",
            tool_calls=(ToolCall(id="call_1", name="search", arguments={"q": "ARG-NEEDLE"}),)),
    Message(role="tool", content="RESULT-NEEDLE: limit lines to 79 characters",
            tool_call_id="call_1", name="search"),
    Message(role="assistant", content="Found it."),
    Message(role="user", content="Summarise in one sentence."),
]
SCHEMA = {"title": "Answer", "type": "object",
          "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
          "required": ["answer", "score"]}


# --- the contract ----------------------------------------------------------------------------

def test_plain_completion_returns_text_and_usage(backend: Backend, server: ScriptedServer) -> None:
    server.push(ok(backend, "Lines of at most 79 characters.", input_tokens=31, output_tokens=9))
    model = backend.make(server.url)

    out = model.complete([Message(role="user", content="hi")], max_tokens=64)

    assert isinstance(out, Completion)
    assert out.text == "Lines of at most 79 characters."
    assert (out.usage.input_tokens, out.usage.output_tokens) == (31, 9)
    assert out.finish_reason
    assert len(server.requests) == 1


def test_transcript_is_sent_in_a_valid_shape(backend: Backend, server: ScriptedServer) -> None:
    server.push(ok(backend, "PEP 8 says 79."))
    model = backend.make(server.url)
    model.complete(TRANSCRIPT, max_tokens=321)
    body = server.requests[0].json()
    wire = backend.wire

    texts = "\n".join(fake.request_texts(wire, body))
    for needle in ("ARG-NEEDLE", "RESULT-NEEDLE", "Summarise in one sentence.", "Found it."):
        assert needle in texts  # nothing of the transcript is lost on the way
    assert "careful researcher" in system_text(wire, body)
    # the answer's 321 tokens, plus room for thinking where the model thinks (Gemini 2.5)
    assert max_tokens_sent(wire, body) == model.output_cap(321) >= 321  # type: ignore[attr-defined]
    if wire == "openai":
        assert roles(wire, body) == ["system", "user", "assistant", "tool", "assistant", "user"]
        call = body["messages"][2]["tool_calls"][0]
        assert call["id"] == body["messages"][3]["tool_call_id"] == "call_1"
        assert json.loads(call["function"]["arguments"]) == {"q": "ARG-NEEDLE"}
    else:
        sequence = roles(wire, body)
        assistant = "model" if wire == "gemini" else "assistant"
        assert "system" not in sequence
        assert sequence[0] == "user" and sequence[-1] == "user"
        assert all(a != b for a, b in zip(sequence, sequence[1:])), sequence
        assert set(sequence) == {"user", assistant}


def test_json_schema_returns_parseable_json(backend: Backend, server: ScriptedServer) -> None:
    answer = {"answer": "79 characters", "score": 3}
    server.push(ok(backend, json.dumps(answer), json_tool=True))

    out = backend.make(server.url).complete(
        [Message(role="user", content="Answer as JSON.")], max_tokens=100, json_schema=SCHEMA)

    assert json.loads(out.text) == answer
    assert structured_output_sent(backend.wire, server.requests[0].json(), SCHEMA)


@pytest.mark.parametrize("failure", [fake.server_error, fake.rate_limit_error])
def test_sdk_never_retries(backend: Backend, server: ScriptedServer,
                           failure: Callable[[fake.Provider], Reply]) -> None:
    server.push(failure(backend.wire), ok(backend, "should never be fetched"))

    exc = raised(lambda: backend.make(server.url).complete(
        [Message(role="user", content="hi")], max_tokens=10))

    assert len(server.requests) == 1  # retries are Prefect's job
    expect_signal(exc, Transient if failure is fake.server_error else RateLimited, backend.wire)


def test_auth_error_is_fatal_and_never_shows_the_key(backend: Backend,
                                                     server: ScriptedServer) -> None:
    server.push(fake.auth_error(backend.wire, API_KEY))
    model = backend.make(server.url)

    exc = raised(lambda: model.complete([Message(role="user", content="hi")], max_tokens=10))

    sent = server.requests[0].headers
    assert API_KEY in (sent.get("authorization", "") + sent.get("x-api-key", "")
                       + sent.get("x-goog-api-key", ""))  # the key did reach the server
    for text in (str(exc), repr(exc), str(sdk_exception(exc)), repr(model)):
        assert API_KEY not in text
    expect_signal(exc, Fatal, backend.wire)


def test_context_overflow_from_the_window_enforcing_fake(backend: Backend,
                                                         server: ScriptedServer) -> None:
    handler = fake.WindowEnforcingHandler(backend.wire, window_tokens=1_000,
                                          overflow_in_stream=True)
    server.default = handler
    model = backend.make(server.url)
    small = [Message(role="user", content="x" * 300)]  # ~100 tokens
    big = [Message(role="user", content="x" * 6_000)]  # ~2000 tokens

    assert model.complete(small, max_tokens=200).text == "fake reply"
    exc = raised(lambda: model.complete(big, max_tokens=200))

    assert (handler.calls, handler.successes, handler.overflows) == (2, 1, 1)
    assert handler.seen[1] == (2_000, model.output_cap(200))  # type: ignore[attr-defined]
    if backend.stream:  # the overflow came inside a 200 SSE stream, not as an HTTP error
        assert type(sdk_exception(exc)).__name__ == "APIError"
    signal = expect_signal(exc, ContextOverflow, backend.wire)
    assert signal.limit == 1_000


def test_timeout_is_honoured_in_seconds(backend: Backend, server: ScriptedServer) -> None:
    def after(seconds: float) -> Callable[[Any], Reply]:
        def handler(rec: Any) -> Reply:
            time.sleep(seconds)
            return ok(backend, "late")
        return handler

    # The late answer comes well after the timeout, so a busy machine cannot blur the two.
    server.push(after(0.1), after(3.0))
    probe = [Message(role="user", content="hi")]

    assert backend.make(server.url, timeout=2.0).complete(probe, max_tokens=5).text == "late"
    started = time.monotonic()
    # min_output_rate=None: exactly the configured seconds (no room added for a long output)
    exc = raised(lambda: backend.make(server.url, timeout=0.2, min_output_rate=None).complete(
        probe, max_tokens=5))
    # gave up long before the answer (Gemini's SDK counts in ms: 0.2 s read as 200 s would not)
    assert time.monotonic() - started < 2.0
    expect_signal(exc, Transient, backend.wire)


def test_model_is_lazy_and_its_repr_hides_the_key(backend: Backend) -> None:
    model = backend.make("http://127.0.0.1:9")  # nothing listens there: no call may happen

    assert isinstance(model, ChatModel)
    assert model._client is None  # type: ignore[attr-defined]
    assert API_KEY not in repr(model) and API_KEY not in str(model)


# --- backend specifics, still through the real SDKs ------------------------------------------

def _openai(url: str, spec: str = "openai:gpt-4o-mini", **options: Any) -> ChatModel:
    return Backend("x", spec, "openai", "/v1").make(url, **options)


def test_openai_reasoning_models_get_max_completion_tokens(server: ScriptedServer) -> None:
    server.push(fake.success_reply("openai", "ok"))
    _openai(server.url, "openai:o3-mini").complete(TRANSCRIPT, max_tokens=77)
    body = server.requests[0].json()
    assert body["max_completion_tokens"] == 77 + REASONING_ALLOWANCE["medium"]  # answer + reasoning
    assert "max_tokens" not in body and "temperature" not in body


@pytest.mark.parametrize("mode, response_format", [("json_object", {"type": "json_object"}),
                                                   ("instruction", None)])
def test_openai_compatible_json_fallbacks(server: ScriptedServer, mode: str,
                                          response_format: dict | None) -> None:
    server.push(fake.success_reply("openai", '{"answer": "x", "score": 1}'))
    out = _openai(server.url, "openai-compatible:llama3.1:8b", json_mode=mode).complete(
        [Message(role="user", content="q")], max_tokens=50, json_schema=SCHEMA)
    body = server.requests[0].json()
    assert body["model"] == "llama3.1:8b"
    assert body.get("response_format") == response_format
    assert json.dumps(SCHEMA) in body["messages"][-1]["content"]  # the schema as an instruction
    assert json.loads(out.text)["score"] == 1


def test_openai_orphan_tool_turns_become_text(server: ScriptedServer) -> None:
    # After shrinking, a call may have lost its result and a result its call: both are 400s
    # at OpenAI when sent as tool messages, so they must arrive as plain text instead.
    server.push(fake.success_reply("openai", "ok"))
    _openai(server.url).complete([
        Message(role="user", content="q"),
        Message(role="assistant", tool_calls=(ToolCall(id="lost", name="fetch"),)),
        Message(role="user", content="go on"),
        Message(role="tool", content="stray result", tool_call_id="gone", name="search"),
    ], max_tokens=10)
    wire = server.requests[0].json()["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "user"]
    assert "tool_calls" not in wire[1] and "fetch" in wire[1]["content"]
    assert "stray result" in wire[3]["content"]


def test_anthropic_non_object_schema_is_wrapped_and_unwrapped(server: ScriptedServer) -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    server.push(fake.success_reply("anthropic", '["a", "b"]', json_tool=True))
    model = Backend("x", "anthropic:claude-sonnet-4-5", "anthropic").make(server.url)
    out = model.complete([Message(role="assistant", content="Earlier answer. "),
                          Message(role="assistant", content="More.")],
                         max_tokens=10, json_schema=schema)
    body = server.requests[0].json()
    assert json.loads(out.text) == ["a", "b"]
    assert body["tools"][0]["input_schema"]["properties"]["value"] == schema
    # a user turn opens, and the two assistant turns are merged into one
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["messages"][1]["content"] == "Earlier answer. \n\nMore."


def test_gemini_blocked_prompt_and_thoughts(server: ScriptedServer) -> None:
    model = Backend("x", "gemini:gemini-2.5-flash", "gemini").make(server.url)
    thought = fake.gemini_response("visible")
    thought["candidates"][0]["content"]["parts"].insert(0, {"text": "hidden", "thought": True})
    server.push(Reply(body=thought),
                Reply(body={"promptFeedback": {"blockReason": "SAFETY"},
                            "usageMetadata": {"promptTokenCount": 4}}))
    first = model.complete([Message(role="user", content="q")], max_tokens=10)
    blocked = model.complete([Message(role="user", content="q")], max_tokens=10)
    assert (first.text, first.finish_reason) == ("visible", "STOP")
    assert (blocked.text, blocked.finish_reason) == ("", "BLOCKED_SAFETY")
    assert server.requests[0].path.endswith("/models/gemini-2.5-flash:generateContent")
