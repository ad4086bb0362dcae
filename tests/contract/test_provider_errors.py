"""Real provider error payloads, replayed through the real SDK clients on loopback.

Every record of provider_errors.jsonl (public error bodies with the right answer) is served by
`ScriptedServer` as status + body; the real openai / anthropic / google-genai client makes a call,
the exception it raises goes through `translate_errors`, and the signal's category and numbers are
checked. String bodies are served twice: wrapped the way that provider really sends them (JSON
envelope) and as raw text/plain, and both must classify alike. `CONSTRUCTED` adds families beyond
the sample, built from the providers' documented error formats. Streams (an error event after a
200) and transport failures (timeout, refused, hang-up) are covered at the end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from core.signals import ContextOverflow, Fatal, RateLimited, Signal, Transient, translate_errors
from tests.contract.error_families import CONSTRUCTED
from tests.fakes.http import Reply, ScriptedServer

FIXTURE_NAME = "provider_errors.jsonl"


def _fixture_path() -> Path:
    root = Path(__file__).resolve().parents[2]
    candidates = [Path(os.environ["RESEARCHFLOW_PROVIDER_FIXTURES"])] \
        if os.environ.get("RESEARCHFLOW_PROVIDER_FIXTURES") else []
    candidates += [root / "tests" / "fixtures" / FIXTURE_NAME,
                   root.parent / "shared" / "fixtures" / FIXTURE_NAME]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"{FIXTURE_NAME} not found in {[str(c) for c in candidates]}")


RECORDS: list[dict[str, Any]] = [json.loads(line) for line in
                                 _fixture_path().read_text().splitlines() if line.strip()]


# -- the real clients ---------------------------------------------------------------------------

MESSAGES = [{"role": "user", "content": "hello"}]


def _openai(url: str, timeout: float) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0, timeout=timeout)


def _anthropic(url: str, timeout: float) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="test", max_retries=0, timeout=timeout)


def _genai(url: str, timeout: float) -> genai.Client:
    return genai.Client(api_key="test", http_options=genai_types.HttpOptions(
        base_url=url, timeout=int(timeout * 1000),
        retry_options=genai_types.HttpRetryOptions(attempts=1)))  # 1 attempt: no SDK retries


def call(family: str, url: str, *, stream: bool = False, timeout: float = 5.0) -> None:
    """One real SDK call against `url`; streams are read to the end."""
    if family == "openai":
        result: Any = _openai(url, timeout).chat.completions.create(
            model="gpt-4o", messages=MESSAGES, max_tokens=16, stream=stream)
    elif family == "anthropic":
        result = _anthropic(url, timeout).messages.create(
            model="claude-sonnet-4-5", max_tokens=16, messages=MESSAGES, stream=stream)
    else:
        client = _genai(url, timeout)  # keep a reference: a collected Client closes its transport
        models = client.models
        result = (models.generate_content_stream if stream else models.generate_content)(
            model="gemini-2.5-flash", contents="hello")
    if stream:
        for _ in result:
            pass


def signal_of(family: str, url: str, model: str | None = None, **kw: Any) -> Signal:
    """Make the call through `translate_errors` and return the signal it raised."""
    with pytest.raises(Signal) as caught:
        with translate_errors(model=model):
            call(family, url, **kw)
    sig = caught.value
    cause = sig.__cause__
    assert cause is not None, "the SDK exception must stay as __cause__"
    assert type(cause).__module__.split(".")[0] in {"openai", "anthropic", "google", "httpx2",
                                                     "httpx"}
    return sig


# -- how each provider really wraps a plain message ---------------------------------------------

RPC = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
       429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
ANTHROPIC_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                  404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                  500: "api_error", 529: "overloaded_error"}


def family_of(rec: dict[str, Any]) -> str:
    if rec.get("sdk_family"):
        return rec["sdk_family"]
    via = rec["via"].split()[0]
    return "genai" if via.startswith("google") else via


def envelope(rec: dict[str, Any]) -> Any:
    """The JSON body this provider sends around a plain message."""
    status, text, provider = rec["status"], rec["body"], rec["provider"]
    family = family_of(rec)
    if family == "genai":
        return {"error": {"code": status, "message": text, "status": RPC.get(status, "UNKNOWN")}}
    if family == "anthropic":
        return {"type": "error", "error": {"type": ANTHROPIC_TYPE.get(status, "api_error"),
                                           "message": text}}
    if provider.startswith("azure"):
        return {"error": {"code": str(status), "message": text}}
    if provider in ("mistral", "vllm", "sglang"):  # FastAPI-style OpenAI-compatible servers
        return {"object": "error", "message": text, "type": "BadRequestError", "param": None,
                "code": status}
    if provider == "groq" and status == 429:
        return {"error": {"message": text, "type": "tokens", "code": "rate_limit_exceeded"}}
    return {"error": {"message": text, "type": None, "code": None}}


def served_variants() -> list[Any]:
    params = []
    for rec in RECORDS:
        if rec["status"] is None:
            params.append(pytest.param(rec, None, id=rec["id"]))
        elif isinstance(rec["body"], str):
            params.append(pytest.param(rec, "json", id=rec["id"] + "-json"))
            params.append(pytest.param(rec, "text", id=rec["id"] + "-text"))
        else:
            params.append(pytest.param(rec, "json", id=rec["id"]))
    return params

CATEGORIES = {"ContextOverflow": ContextOverflow, "RateLimited": RateLimited,
              "Transient": Transient, "Fatal": Fatal}

# Numbers the records imply beyond category/limit/requested.
EXTRA: dict[str, dict[str, Any]] = {
    "anthropic-input-plus-max-tokens-204648": {"input_tokens": 184915, "output_tokens": 20000},
    "openai-ctx-with-completion": {"input_tokens": 3120, "output_tokens": 1000},
    "vllm-ctx-classic": {"input_tokens": 112946, "output_tokens": 10000},
    "litellm-proxy-wrapped-anthropic-ctx": {"input_tokens": 179413, "output_tokens": 32768},
    "groq-429-tpm": {"retry_after": 4.77, "tokens_per_minute": 6000},
    "azure-429-seconds": {"retry_after": 9},
    "litellm-proxy-wrapped-azure-429": {"retry_after": 86400},
    "anthropic-max-tokens-output-cap": {"max_output": 4096, "reason": "output_cap"},
    "openai-insufficient-quota": {"reason": "billing"},
    "gemini-400-bad-api-key": {"reason": "auth"},
    "openai-model-not-found": {"reason": "not_found"},
    "azure-deployment-not-found": {"reason": "not_found"},
}


def check(sig: Signal, rec: dict[str, Any]) -> None:
    assert type(sig) is CATEGORIES[rec["category"]], f"{rec['id']}: got {type(sig).__name__}: {sig}"
    assert getattr(sig, "limit", None) == rec["limit"]
    assert getattr(sig, "requested", None) == rec["requested"]
    assert getattr(sig, "limit_kind", None) == rec["limit_kind"]
    for name, value in EXTRA.get(rec["id"], {}).items():
        assert getattr(sig, name) == value, f"{rec['id']}: {name}"
    if rec["status"] is not None:
        assert sig.status == rec["status"]
    assert sig.provider == {"openai": "openai", "anthropic": "anthropic", "genai": "gemini"}[
        family_of(rec)]
    assert sig.hint, "every signal from a provider says what to do"


@pytest.mark.parametrize("rec,variant", served_variants())
def test_fixture_record(rec: dict[str, Any], variant: str | None, silent_url: str,
                        server: ScriptedServer) -> None:
    family = family_of(rec)
    if rec["status"] is None:  # no HTTP response: the client times out against a silent server
        sig = signal_of(family, silent_url, timeout=0.5)
        check(sig, rec)
        return
    body = rec["body"]
    if isinstance(body, str) and variant == "json":
        body = envelope(rec)
    server.push(Reply(rec["status"], body))
    sig = signal_of(family, server.url, model="some-model")
    assert len(server.requests) == 1, "the SDK must not retry (max_retries=0)"
    check(sig, rec)
    assert sig.model == "some-model"


def test_every_record_is_replayed() -> None:
    assert len(RECORDS) >= 30
    assert {r["category"] for r in RECORDS} == set(CATEGORIES)




@pytest.mark.parametrize("family,status,body,headers,category,expect", CONSTRUCTED)
def test_constructed_family(family: str, status: int, body: Any, headers: dict[str, str],
                            category: str, expect: dict[str, Any], server: ScriptedServer) -> None:
    server.push(Reply(status, body, headers=headers))
    sig = signal_of(family, server.url)
    assert type(sig) is CATEGORIES[category], f"got {type(sig).__name__}: {sig}"
    assert sig.status == status
    for name, value in expect.items():
        assert getattr(sig, name) == value, f"{name}: {getattr(sig, name)!r} != {value!r}"
    if category == "RateLimited" and "x-ratelimit-reset" in headers:
        assert sig.retry_after is not None and sig.retry_after > 3600  # epoch ms, in the future


def test_api_key_never_reaches_the_message(server: ScriptedServer) -> None:
    body = {"error": {"message": "Incorrect API key provided: sk-proj-AbCdEf1234567890XYZ. You can "
                      "find your API key at https://platform.openai.com/account/api-keys.",
                      "type": "invalid_request_error", "code": "invalid_api_key"}}
    server.push(Reply(401, body))
    sig = signal_of("openai", server.url)
    assert "AbCdEf1234567890XYZ" not in str(sig)
    assert "OPENAI_API_KEY" in (sig.hint or "")


# -- overflow inside a 200 stream ----------------------------------------------------------------

CHUNK = json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
                    "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]})


def test_openai_stream_error_event_is_overflow(server: ScriptedServer) -> None:
    error = {"error": {"message": "This model's maximum context length is 8192 tokens. However, "
                       "your messages resulted in 9000 tokens.", "type": "invalid_request_error",
                       "param": "messages", "code": "context_length_exceeded"}}
    server.push(Reply(200, sse=[f"data: {CHUNK}", f"data: {json.dumps(error)}"]))
    sig = signal_of("openai", server.url, stream=True)
    assert isinstance(sig, ContextOverflow)
    assert (sig.limit, sig.requested, sig.status) == (8192, 9000, None)
    assert type(sig.__cause__) is openai.APIError  # the SDK's stream error, no status code


def test_openai_stream_server_error_is_transient(server: ScriptedServer) -> None:
    error = {"error": {"message": "The server had an error while processing your request.",
                       "type": "server_error"}}
    server.push(Reply(200, sse=[f"data: {CHUNK}", f"data: {json.dumps(error)}"]))
    sig = signal_of("openai", server.url, stream=True)
    assert isinstance(sig, Transient)

START = 'event: message_start\ndata: ' + json.dumps({"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5",
    "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})


@pytest.mark.parametrize("error,category,limit", [
    ({"type": "invalid_request_error", "message": "prompt is too long: 208732 tokens > 200000 "
                                                  "maximum"}, ContextOverflow, 200000),
    ({"type": "overloaded_error", "message": "Overloaded"}, RateLimited, None),
    ({"type": "api_error", "message": "Internal server error"}, Transient, None),
], ids=["overflow", "overloaded", "api-error"])


def test_anthropic_stream_error_event(error: dict[str, str], category: type, limit: int | None,
                                     server: ScriptedServer) -> None:
    event = "event: error\ndata: " + json.dumps({"type": "error", "error": error})
    server.push(Reply(200, sse=[START, event]))
    sig = signal_of("anthropic", server.url, stream=True)
    assert type(sig) is category
    assert getattr(sig, "limit", None) == limit
    assert sig.status is None  # the 200 of the stream says nothing about the error


def test_genai_stream_error_chunk_is_overflow(server: ScriptedServer) -> None:
    chunk = {"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum "
                       "number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}
    server.push(Reply(200, sse=[f"data: {json.dumps(chunk)}"]))
    sig = signal_of("genai", server.url, stream=True)
    assert isinstance(sig, ContextOverflow)
    assert (sig.limit, sig.requested) == (1048576, 1200000)


# -- transport ---------------------------------------------------------------------------------

FAMILIES = ["openai", "anthropic", "genai"]


@pytest.mark.parametrize("family", FAMILIES)
def test_timeout_is_transient(family: str, silent_url: str) -> None:
    sig = signal_of(family, silent_url, timeout=0.5)
    assert isinstance(sig, Transient) and "timed out" in sig.message


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("server", ["refused_url", "hangup_url"])
def test_connection_failure_is_transient(family: str, server: str,
                                         request: pytest.FixtureRequest) -> None:
    url: str = request.getfixturevalue(server)
    sig = signal_of(family, url, timeout=2.0)
    assert isinstance(sig, Transient)


def test_unknown_exception_is_fatal_with_its_message() -> None:
    with pytest.raises(Fatal) as caught:
        with translate_errors():
            raise ValueError("bad prompt template: missing {topic}")
    assert "bad prompt template" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)
