"""Token usage, through the real SDKs: every token the provider bills, from its own usage fields.

Each provider lays its usage out differently; `core.llm.base.Usage` is the one normalised shape:
`input_tokens` counts all input (cached included), `output_tokens` all billed output (reasoning
included), and `cached_input_tokens` / `reasoning_tokens` are parts of them. These tests serve the
providers' wire bodies from a loopback `ScriptedServer` and read what the backend reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from core.llm.base import ChatModel, Usage
from core.llm.registry import make_model
from core.models import Message
from core.settings import Settings
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer

API_KEY = "sk-usage-test-0123456789abcdef"
PROMPT = [Message(role="system", content="Be brief."), Message(role="user", content="Hi?")]


@dataclass(frozen=True)
class Backend:
    id: str
    spec: str
    wire: fake.Provider
    url_suffix: str = ""
    stream: bool = False

    def make(self, url: str) -> ChatModel:
        base = url + self.url_suffix
        settings = Settings(_env_file=None, request_timeout=10, openai_api_key=API_KEY,
                            anthropic_api_key=API_KEY, gemini_api_key=API_KEY,
                            openai_base_url=base, anthropic_base_url=base, gemini_base_url=base)
        options = {"stream": True} if self.stream else {}
        return make_model(self.spec, settings, **options)


OPENAI = Backend("openai", "openai:gpt-4o-mini", "openai", "/v1")
OPENAI_STREAM = Backend("openai-stream", "openai:gpt-4o-mini", "openai", "/v1", stream=True)
COMPATIBLE = Backend("openai-compatible", "openai-compatible:llama3.1:8b", "openai", "/v1")
COMPATIBLE_STREAM = Backend("openai-compatible-stream", "openai-compatible:llama3.1:8b",
                            "openai", "/v1", stream=True)
ANTHROPIC = Backend("anthropic", "anthropic:claude-sonnet-4-5", "anthropic")
GEMINI = Backend("gemini", "gemini:gemini-2.5-flash", "gemini")
BACKENDS = [OPENAI, OPENAI_STREAM, ANTHROPIC, GEMINI]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.id)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


def usage_of(backend: Backend, server: ScriptedServer, reply: Reply) -> Usage:
    server.push(reply)
    out = backend.make(server.url).complete(PROMPT, max_tokens=50)
    assert len(server.requests) == 1
    return out.usage


# --- the normalised shape, whatever the wire layout ------------------------------------------

def test_usage_defaults_and_reported() -> None:
    assert Usage() == Usage(None, None, None, None)
    assert not Usage().reported
    assert Usage(12, 3).reported and Usage(12, 3) == Usage(input_tokens=12, output_tokens=3)
    assert Usage(input_tokens=0).reported  # zero is a count, not a missing one
    assert Usage(output_tokens=7).reported
    assert not Usage(cached_input_tokens=5, reasoning_tokens=2).reported


def test_cached_and_reasoning_tokens_are_reported(backend: Backend,
                                                  server: ScriptedServer) -> None:
    reply = fake.success_reply(backend.wire, "ok", stream=backend.stream, input_tokens=1_200,
                               output_tokens=350, cached_input_tokens=800,
                               reasoning_tokens=200)

    usage = usage_of(backend, server, reply)

    assert usage == Usage(input_tokens=1_200, output_tokens=350, cached_input_tokens=800,
                          reasoning_tokens=200)
    assert usage.reported


def test_zero_cached_and_reasoning_are_zero_not_missing(backend: Backend,
                                                        server: ScriptedServer) -> None:
    reply = fake.success_reply(backend.wire, "ok", stream=backend.stream, input_tokens=40,
                               output_tokens=9, cached_input_tokens=0, reasoning_tokens=0)

    assert usage_of(backend, server, reply) == Usage(40, 9, 0, 0)


def test_plain_usage_leaves_the_parts_unknown(backend: Backend, server: ScriptedServer) -> None:
    reply = fake.success_reply(backend.wire, "ok", stream=backend.stream, input_tokens=31,
                               output_tokens=9)

    usage = usage_of(backend, server, reply)

    assert usage == Usage(31, 9, None, None) and usage.reported


# --- each provider's own layout, from raw wire bodies ----------------------------------------

@pytest.mark.parametrize("backend", [OPENAI, OPENAI_STREAM], ids=lambda b: b.id)
def test_openai_prompt_tokens_include_cached_and_completion_includes_reasoning(
        backend: Backend, server: ScriptedServer) -> None:
    counts: dict[str, Any] = dict(prompt_tokens=2_006, completion_tokens=300,
                                  cached_tokens=1_920, reasoning_tokens=192)
    reply = (Reply(sse=fake.openai_sse("ok", **counts)) if backend.stream
             else Reply(body=fake.openai_completion("ok", **counts)))

    assert usage_of(backend, server, reply) == Usage(2_006, 300, 1_920, 192)


def test_openai_stream_reads_the_final_usage_chunk(server: ScriptedServer) -> None:
    chunks = fake.openai_sse("streamed", prompt_tokens=70, completion_tokens=20,
                             cached_tokens=64, reasoning_tokens=12)
    server.push(Reply(sse=chunks))

    out = OPENAI_STREAM.make(server.url).complete(PROMPT, max_tokens=50)

    body = server.requests[0].json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert out.text == "streamed"
    assert out.usage == Usage(70, 20, 64, 12)


def test_anthropic_input_is_uncached_plus_cache_reads_plus_cache_writes(
        server: ScriptedServer) -> None:
    body = fake.anthropic_message("ok", input_tokens=50, output_tokens=40, cache_read=900,
                                  cache_creation=100)

    usage = usage_of(ANTHROPIC, server, Reply(body=body))

    assert usage == Usage(input_tokens=1_050, output_tokens=40, cached_input_tokens=900,
                          reasoning_tokens=None)


def test_anthropic_null_cache_fields_count_as_absent(server: ScriptedServer) -> None:
    body = fake.anthropic_message("ok", input_tokens=21, output_tokens=6)
    body["usage"].update(cache_creation_input_tokens=None, cache_read_input_tokens=None,
                         cache_creation=None, server_tool_use=None, service_tier="standard")

    assert usage_of(ANTHROPIC, server, Reply(body=body)) == Usage(21, 6, None, None)


def test_anthropic_thinking_tokens_when_the_api_splits_them_out(server: ScriptedServer) -> None:
    body = fake.anthropic_message("ok", input_tokens=30, output_tokens=500, cache_read=0,
                                  cache_creation=0, thinking_tokens=420)

    assert usage_of(ANTHROPIC, server, Reply(body=body)) == Usage(30, 500, 0, 420)


def test_gemini_thoughts_are_output_and_tool_use_prompt_is_input(server: ScriptedServer) -> None:
    body = fake.gemini_response("ok", prompt_tokens=1_000, output_tokens=100, cached=700,
                                thoughts=250, tool_use_prompt=30)

    usage = usage_of(GEMINI, server, Reply(body=body))

    assert usage == Usage(input_tokens=1_030, output_tokens=350, cached_input_tokens=700,
                          reasoning_tokens=250)


def test_gemini_blocked_prompt_reports_input_only(server: ScriptedServer) -> None:
    body = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 4}}

    usage = usage_of(GEMINI, server, Reply(body=body))

    assert usage == Usage(4, None, None, None) and usage.reported


# --- no usage, or usage with holes: never a crash --------------------------------------------

def _without_usage(backend: Backend) -> Reply:
    if backend.wire == "openai" and backend.stream:  # the server ignored include_usage
        chunks = fake.openai_sse("ok")
        return Reply(sse=chunks[:-2] + chunks[-1:])
    if backend.wire == "openai":
        body = fake.openai_completion("ok")
        del body["usage"]
        return Reply(body=body)
    if backend.wire == "anthropic":
        body = fake.anthropic_message("ok")
        del body["usage"]
        return Reply(body=body)
    body = fake.gemini_response("ok")
    del body["usageMetadata"]
    return Reply(body=body)


def test_no_usage_at_all_is_unreported(backend: Backend, server: ScriptedServer) -> None:
    server.push(_without_usage(backend))

    out = backend.make(server.url).complete(PROMPT, max_tokens=50)

    assert out.text == "ok"
    assert out.usage == Usage(None, None, None, None)
    assert not out.usage.reported


COMPATIBLE_USAGES = [
    pytest.param({"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
                  "prompt_tokens_details": None, "completion_tokens_details": None},
                 Usage(12, 4), id="null-details"),
    pytest.param({"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
                  "prompt_tokens_details": {}, "completion_tokens_details": {}},
                 Usage(12, 4), id="empty-details"),
    pytest.param({"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
                  "prompt_tokens_details": {"cached_tokens": None},
                  "completion_tokens_details": {"reasoning_tokens": None}},
                 Usage(12, 4), id="null-detail-counts"),
    pytest.param({"prompt_tokens": 12, "completion_tokens": None, "total_tokens": None},
                 Usage(12, None), id="null-completion"),
    pytest.param({"prompt_tokens": None, "completion_tokens": None, "total_tokens": None},
                 Usage(), id="all-null"),
    pytest.param({}, Usage(), id="empty"),
    pytest.param(None, Usage(), id="null-usage"),
]


@pytest.mark.parametrize("wire_usage, expected", COMPATIBLE_USAGES)
def test_openai_compatible_usage_with_holes(server: ScriptedServer, wire_usage: Any,
                                            expected: Usage) -> None:
    body = fake.openai_completion("ok", model="llama3.1:8b")
    body["usage"] = wire_usage

    server.push(Reply(body=body))

    out = COMPATIBLE.make(server.url).complete(PROMPT, max_tokens=50)

    assert out.text == "ok"
    assert out.usage == expected
    assert out.usage.reported == (expected.input_tokens is not None
                                  or expected.output_tokens is not None)


@pytest.mark.parametrize("wire_usage, expected", COMPATIBLE_USAGES)
def test_openai_compatible_stream_usage_with_holes(server: ScriptedServer, wire_usage: Any,
                                                   expected: Usage) -> None:
    chunks = fake.openai_sse("ok", model="llama3.1:8b")
    # the usage chunk is the last before [DONE]; rewrite its usage object
    last = json.loads(chunks[-2].removeprefix("data: "))
    last["usage"] = wire_usage
    chunks[-2] = "data: " + json.dumps(last)

    usage = usage_of(COMPATIBLE_STREAM, server, Reply(sse=chunks))

    assert usage == expected


def test_openai_stream_empty_usage_chunk_keeps_earlier_counts(server: ScriptedServer) -> None:
    # Some compatible servers repeat usage on several chunks; a trailing empty one must not
    # erase the counts already seen.
    chunks = fake.openai_sse("ok", prompt_tokens=15, completion_tokens=3)
    tail = json.loads(chunks[-2].removeprefix("data: "))
    tail["usage"] = {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None}
    chunks.insert(-1, "data: " + json.dumps(tail))

    assert usage_of(COMPATIBLE_STREAM, server, Reply(sse=chunks)) == Usage(15, 3)
