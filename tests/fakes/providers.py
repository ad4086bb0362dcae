"""Loopback fakes of the three chat providers' wire formats, for contract tests, flow tests and bench.

Builders return what `tests.fakes.http.ScriptedServer` serves: bodies and `Reply`s shaped exactly
like OpenAI Chat Completions (JSON and SSE chunks), Anthropic Messages (JSON and SSE events) and
Gemini generateContent (JSON), plus each provider's real error bodies (auth, rate limit, server
error, context overflow). `WindowEnforcingHandler` is a whole fake provider: it estimates a
request's input tokens (message text bytes / 3, the rule of thumb in ARCHITECTURE.md), answers with that provider's
real overflow error when the request does not fit the window, and otherwise with a success whose
text comes from a pluggable `respond(request_json)` callback.

    with ScriptedServer(default=WindowEnforcingHandler("anthropic", 8_000)) as srv:
        AnthropicChat("claude-sonnet-4-5", api_key=..., base_url=srv.url).complete(...)
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from tests.fakes.http import Recorded, Reply

Provider = Literal["openai", "anthropic", "gemini"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic", "gemini")
Respond = Callable[[dict[str, Any]], str]


def _pieces(text: str, n: int = 3) -> list[str]:
    step = max(1, -(-len(text) // n))
    return [text[i:i + step] for i in range(0, len(text), step)] or [""]


def _sse(data: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data if isinstance(data, str) else json.dumps(data)}"


# --- success bodies ---------------------------------------------------------------------------

def openai_usage(prompt_tokens: int = 10, completion_tokens: int = 5, *,
                 cached_tokens: int | None = None,
                 reasoning_tokens: int | None = None) -> dict[str, Any]:
    """A Chat Completions `usage` object. `prompt_tokens` includes `cached_tokens` and
    `completion_tokens` includes `reasoning_tokens`, as at OpenAI. A detail given (even 0) adds
    its `*_tokens_details` object, laid out as OpenAI sends it; None leaves it out."""
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens, "audio_tokens": 0}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {
            "reasoning_tokens": reasoning_tokens, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
    return usage


def openai_completion(text: str, *, model: str = "gpt-4o-mini", prompt_tokens: int = 10,
                      completion_tokens: int = 5, finish_reason: str = "stop",
                      cached_tokens: int | None = None,
                      reasoning_tokens: int | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                         "message": {"role": "assistant", "content": text, "refusal": None}}],
            "usage": openai_usage(prompt_tokens, completion_tokens, cached_tokens=cached_tokens,
                                  reasoning_tokens=reasoning_tokens)}


def openai_sse(text: str, *, model: str = "gpt-4o-mini", prompt_tokens: int = 10,
               completion_tokens: int = 5, finish_reason: str = "stop",
               cached_tokens: int | None = None,
               reasoning_tokens: int | None = None) -> list[str]:
    """Chunks as sent with `stream_options.include_usage`: deltas, finish, usage, [DONE]."""
    base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": model}
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "finish_reason": None}], "usage": None}]
    chunks += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}],
                "usage": None} for p in _pieces(text)]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}],
                   "usage": None})
    chunks.append({**base, "choices": [], "usage": openai_usage(
        prompt_tokens, completion_tokens, cached_tokens=cached_tokens,
        reasoning_tokens=reasoning_tokens)})
    return [_sse(c) for c in chunks] + [_sse("[DONE]")]


def openai_sse_error(body: dict[str, Any], *, after: str = "") -> list[str]:
    """A 200 stream that carries an error (as vLLM/LiteLLM-style servers do), after some text."""
    head = openai_sse(after)[:2] if after else []
    return head + [_sse(body)]


def anthropic_usage(input_tokens: int = 10, output_tokens: int = 5, *,
                    cache_read: int | None = None, cache_creation: int | None = None,
                    thinking_tokens: int | None = None) -> dict[str, Any]:
    """A Messages API `usage` object. As at Anthropic, `input_tokens` is only the UNCACHED input:
    cache reads and writes are reported beside it; `output_tokens` includes any thinking, which
    `output_tokens_details.thinking_tokens` splits out. None leaves a field out."""
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    return usage


def anthropic_message(text: str = "", *, model: str = "claude-sonnet-4-5",
                      input_tokens: int = 10, output_tokens: int = 5,
                      stop_reason: str = "end_turn",
                      tool_input: dict[str, Any] | None = None,
                      tool_name: str = "emit", cache_read: int | None = None,
                      cache_creation: int | None = None,
                      thinking_tokens: int | None = None) -> dict[str, Any]:
    """A Messages API reply; with `tool_input`, a tool_use block (forced structured output)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if tool_input is not None:
        content.append({"type": "tool_use", "id": "toolu_fake", "name": tool_name,
                        "input": tool_input})
        stop_reason = "tool_use"
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": anthropic_usage(input_tokens, output_tokens, cache_read=cache_read,
                                     cache_creation=cache_creation,
                                     thinking_tokens=thinking_tokens)}


def anthropic_sse(text: str, *, model: str = "claude-sonnet-4-5", input_tokens: int = 10,
                  output_tokens: int = 5, stop_reason: str = "end_turn",
                  cache_read: int | None = None, cache_creation: int | None = None,
                  thinking_tokens: int | None = None) -> list[str]:
    """Events as Anthropic streams them: the input and cache counts come in `message_start`,
    the cumulative output count in the closing `message_delta`."""
    message = anthropic_message("", model=model, input_tokens=input_tokens, output_tokens=1,
                                cache_read=cache_read, cache_creation=cache_creation)
    message["stop_reason"] = None
    events = [("message_start", {"type": "message_start", "message": message}),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": p}})
               for p in _pieces(text)]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                  "usage": anthropic_delta_usage(output_tokens,
                                                                 thinking_tokens)}),
               ("message_stop", {"type": "message_stop"})]
    return [_sse(data, event) for event, data in events]


def anthropic_delta_usage(output_tokens: int, thinking_tokens: int | None = None
                          ) -> dict[str, Any]:
    usage: dict[str, Any] = {"output_tokens": output_tokens}
    if thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    return usage


def gemini_usage(prompt_tokens: int = 10, output_tokens: int = 5, *,
                 cached: int | None = None, thoughts: int | None = None,
                 tool_use_prompt: int | None = None) -> dict[str, Any]:
    """A generateContent `usageMetadata`. As at Google, `promptTokenCount` includes the `cached`
    content, and `output_tokens` (candidatesTokenCount) excludes the `thoughts`, which are
    reported beside it; tool-use prompt tokens are reported beside the prompt. None: left out."""
    meta: dict[str, Any] = {"promptTokenCount": prompt_tokens,
                            "candidatesTokenCount": output_tokens}
    if cached is not None:
        meta["cachedContentTokenCount"] = cached
    if tool_use_prompt is not None:
        meta["toolUsePromptTokenCount"] = tool_use_prompt
    if thoughts is not None:
        meta["thoughtsTokenCount"] = thoughts
    meta["totalTokenCount"] = prompt_tokens + output_tokens + (thoughts or 0) \
        + (tool_use_prompt or 0)
    return meta


def gemini_response(text: str, *, model: str = "gemini-2.5-flash", prompt_tokens: int = 10,
                    output_tokens: int = 5, finish_reason: str = "STOP",
                    cached: int | None = None, thoughts: int | None = None,
                    tool_use_prompt: int | None = None) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": finish_reason, "index": 0}],
            "usageMetadata": gemini_usage(prompt_tokens, output_tokens, cached=cached,
                                          thoughts=thoughts, tool_use_prompt=tool_use_prompt),
            "modelVersion": model, "responseId": "fake-response"}


def success_reply(provider: Provider, text: str, *, stream: bool = False,
                  json_tool: bool = False, input_tokens: int = 10,
                  output_tokens: int = 5, cached_input_tokens: int | None = None,
                  reasoning_tokens: int | None = None) -> Reply:
    """A 200 in the provider's format. `json_tool`: Anthropic answers through the emit tool.

    The counts are the normalised totals a backend should report (`core.llm.base.Usage`):
    `input_tokens` includes `cached_input_tokens` and `output_tokens` includes
    `reasoning_tokens`; each is laid out on the wire the way that provider reports it.
    """
    if provider == "openai":
        counts = dict(prompt_tokens=input_tokens, completion_tokens=output_tokens,
                      cached_tokens=cached_input_tokens, reasoning_tokens=reasoning_tokens)
        return Reply(sse=openai_sse(text, **counts)) if stream \
            else Reply(body=openai_completion(text, **counts))
    if provider == "anthropic":
        # Anthropic's input_tokens is the uncached part; cache reads are reported beside it.
        a_counts: dict[str, Any] = dict(
            input_tokens=input_tokens - (cached_input_tokens or 0), output_tokens=output_tokens,
            cache_read=cached_input_tokens, thinking_tokens=reasoning_tokens)
        if stream:
            return Reply(sse=anthropic_sse(text, **a_counts))
        if json_tool:
            value = json.loads(text)  # tool inputs are objects: other values come wrapped
            value = value if isinstance(value, dict) else {"value": value}
            return Reply(body=anthropic_message(tool_input=value, **a_counts))
        return Reply(body=anthropic_message(text, **a_counts))
    # Gemini's candidatesTokenCount excludes the thoughts, which are reported beside it.
    return Reply(body=gemini_response(text, prompt_tokens=input_tokens,
                                      output_tokens=output_tokens - (reasoning_tokens or 0),
                                      cached=cached_input_tokens, thoughts=reasoning_tokens))


# --- error bodies (real shapes; see ../shared/fixtures/provider_errors.jsonl) -----------------

_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                  503: "UNAVAILABLE"}


def error_body(provider: Provider, status: int, message: str, *, type: str | None = None,
               code: str | None = None, param: str | None = None,
               details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An error body in the provider's shape (`type`/`code` default sensibly per status)."""
    if provider == "openai":
        return {"error": {"message": message, "type": type or "invalid_request_error",
                          "param": param, "code": code}}
    if provider == "anthropic":
        return {"type": "error", "error": {"type": type or "invalid_request_error",
                                           "message": message}}
    err: dict[str, Any] = {"code": status, "message": message,
                           "status": type or _GOOGLE_STATUS.get(status, "UNKNOWN")}
    if details:
        err["details"] = details
    return {"error": err}


def auth_error(provider: Provider, api_key: str = "sk-test-key") -> Reply:
    """What each provider really answers to a wrong key (Gemini: a 400, not a 401)."""
    if provider == "openai":
        masked = api_key[:3] + "*" * max(0, len(api_key) - 7) + api_key[-4:]
        return Reply(401, error_body("openai", 401, f"Incorrect API key provided: {masked}. "
                                     "You can find your API key at "
                                     "https://platform.openai.com/account/api-keys.",
                                     code="invalid_api_key"))
    if provider == "anthropic":
        return Reply(401, error_body("anthropic", 401, "invalid x-api-key",
                                     type="authentication_error"))
    return Reply(400, error_body("gemini", 400, "API key not valid. Please pass a valid API key.",
                                 details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                           "reason": "API_KEY_INVALID",
                                           "domain": "googleapis.com"}]))


def rate_limit_error(provider: Provider, retry_after: int = 7) -> Reply:
    headers = {"retry-after": str(retry_after)}
    if provider == "openai":
        return Reply(429, error_body(
            "openai", 429, "Rate limit reached for gpt-4o-mini in organization org-fake on "
            f"requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in "
            f"{retry_after}s.", type="requests", code="rate_limit_exceeded"), headers)
    if provider == "anthropic":
        return Reply(429, error_body("anthropic", 429, "Number of request tokens has exceeded "
                                     "your per-minute rate limit", type="rate_limit_error"),
                     headers)
    return Reply(429, error_body("gemini", 429, "You exceeded your current quota, please check "
                                 "your plan and billing details.",
                                 details=[{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                           "retryDelay": f"{retry_after}s"}]))


def server_error(provider: Provider) -> Reply:
    if provider == "openai":
        return Reply(500, error_body("openai", 500, "The server had an error while processing "
                                     "your request. Sorry about that!", type="server_error"))
    if provider == "anthropic":
        return Reply(500, error_body("anthropic", 500, "Internal server error", type="api_error"))
    return Reply(500, error_body("gemini", 500, "An internal error has occurred. Please retry."))


def overflow_body(provider: Provider, window: int, input_tokens: int,
                  max_tokens: int = 0) -> dict[str, Any]:
    """The provider's real context-overflow error for this request size."""
    if provider == "openai":
        if input_tokens > window or not max_tokens:
            text = (f"This model's maximum context length is {window} tokens. However, your "
                    f"messages resulted in {input_tokens} tokens. Please reduce the length of "
                    "the messages.")
        else:
            text = (f"This model's maximum context length is {window} tokens. However, you "
                    f"requested {input_tokens + max_tokens} tokens ({input_tokens} in the "
                    f"messages, {max_tokens} in the completion). Please reduce the length of "
                    "the messages or completion.")
        return error_body("openai", 400, text, param="messages", code="context_length_exceeded")
    if provider == "anthropic":
        if input_tokens > window or not max_tokens:
            text = f"prompt is too long: {input_tokens} tokens > {window} maximum"
        else:
            text = (f"input length and `max_tokens` exceed context limit: {input_tokens} + "
                    f"{max_tokens} > {window}, decrease input length or `max_tokens` and try "
                    "again")
        return error_body("anthropic", 400, text)
    return error_body("gemini", 400, f"The input token count ({input_tokens}) exceeds the "
                      f"maximum number of tokens allowed ({window}).")


def overflow_reply(provider: Provider, window: int, input_tokens: int,
                   max_tokens: int = 0) -> Reply:
    return Reply(400, overflow_body(provider, window, input_tokens, max_tokens))


# --- reading requests ------------------------------------------------------------------------

def _texts(value: Any) -> list[str]:
    """Every text a content value carries (strings, text parts, tool inputs and results)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    if isinstance(value, dict):
        out = _texts(value.get("text")) + _texts(value.get("content"))
        for key in ("input", "args", "arguments"):
            if key in value:
                out.append(value[key] if isinstance(value[key], str) else json.dumps(value[key]))
        if isinstance(value.get("function"), dict):
            out += _texts(value["function"].get("arguments"))
        return out + _texts(value.get("tool_calls")) + _texts(value.get("parts"))
    return []


def request_texts(provider: Provider, body: dict[str, Any]) -> list[str]:
    """What the provider counts as input: the messages, and the output schema or tools too
    (structured output is part of the prompt a model is billed and limited for)."""
    if provider == "openai":
        return _texts(body.get("messages")) + _schema(body.get("response_format"))
    if provider == "anthropic":
        return (_texts(body.get("system")) + _texts(body.get("messages"))
                + _schema(body.get("tools")))
    config = body.get("generationConfig") or {}
    return (_texts(body.get("systemInstruction")) + _texts(body.get("contents"))
            + _schema(config.get("responseJsonSchema") or config.get("responseSchema")))


def _schema(value: Any) -> list[str]:
    return [json.dumps(value)] if value else []


def requested_max_tokens(provider: Provider, body: dict[str, Any]) -> int:
    if provider == "openai":
        return int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
    if provider == "anthropic":
        return int(body.get("max_tokens") or 0)
    return int((body.get("generationConfig") or {}).get("maxOutputTokens") or 0)


def estimate_tokens(provider: Provider, body: dict[str, Any],
                    chars_per_token: float = 3.0) -> int:
    """Input tokens as bytes of the message texts / chars_per_token (rounded up)."""
    size = sum(len(t.encode("utf-8")) for t in request_texts(provider, body))
    return int(-(-size // chars_per_token))


def default_respond(body: dict[str, Any]) -> str:
    return "fake reply"


@dataclass
class WindowEnforcingHandler:
    """A fake provider with a context window; queue it as a ScriptedServer default.

    Overflow rule: input + requested max tokens > window for OpenAI and Anthropic (their windows
    include the output); input > window for Gemini, whose input limit excludes the output.
    `overflow_in_stream=True` sends OpenAI overflows inside a 200 SSE stream when the request
    streams, as some OpenAI-compatible servers do. Thread safe; counters are for assertions.
    """

    provider: Provider
    window_tokens: int
    chars_per_token: float = 3.0
    respond: Respond = default_respond
    overflow_in_stream: bool = False
    calls: int = 0
    overflows: int = 0
    successes: int = 0
    seen: list[tuple[int, int]] = field(default_factory=list)  # (input, max_tokens) per call
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fits(self, input_tokens: int, max_tokens: int) -> bool:
        if self.provider == "gemini":
            return input_tokens <= self.window_tokens
        return input_tokens + max_tokens <= self.window_tokens

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json() or {}
        input_tokens = estimate_tokens(self.provider, body, self.chars_per_token)
        max_tokens = requested_max_tokens(self.provider, body)
        stream = bool(body.get("stream"))
        with self._lock:
            self.calls += 1
            self.seen.append((input_tokens, max_tokens))
            fits = self.fits(input_tokens, max_tokens)
            if fits:
                self.successes += 1
            else:
                self.overflows += 1
        if not fits:
            err = overflow_body(self.provider, self.window_tokens, input_tokens, max_tokens)
            if self.provider == "openai" and stream and self.overflow_in_stream:
                return Reply(sse=openai_sse_error(err))
            return Reply(400, err)
        text = self.respond(body)
        out_tokens = max(1, estimate_tokens("openai", {"messages": [text]}, self.chars_per_token))
        forced = (body.get("tool_choice") or {}).get("type") == "tool"
        return success_reply(self.provider, text, stream=stream,
                             json_tool=self.provider == "anthropic" and forced,
                             input_tokens=input_tokens, output_tokens=out_tokens)


# --- streams with thinking and errors, and refused parameters ---------------------------------

def anthropic_sse_error(error: dict[str, Any], *, after: str = "") -> list[str]:
    """A 200 Messages stream that breaks off with an `error` event (as Anthropic sends an
    overload mid-stream), after `after`'s text."""
    head = anthropic_sse(after)[:3] if after else anthropic_sse("")[:1]
    return head + [_sse({"type": "error", "error": error}, "error")]


def gemini_sse(text: str, *, model: str = "gemini-2.5-flash", prompt_tokens: int = 10,
               output_tokens: int = 5, finish_reason: str = "STOP", cached: int | None = None,
               thoughts: int | None = None, thought_text: str | None = None) -> list[str]:
    """Chunks as `:streamGenerateContent?alt=sse` sends them: each a GenerateContentResponse with
    a piece of the text (a thought part first, when given); the last carries the finish reason
    and the usage (cumulative, like every usageMetadata in a Gemini stream)."""
    def chunk(parts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        candidate.update(extra.pop("candidate", {}))
        return {"candidates": [candidate], "modelVersion": model,
                "responseId": "fake-stream", **extra}

    chunks: list[dict[str, Any]] = []
    if thought_text is not None:
        chunks.append(chunk([{"text": thought_text, "thought": True}]))
    chunks += [chunk([{"text": p}]) for p in _pieces(text)]
    chunks[-1] = {**chunks[-1], "usageMetadata": gemini_usage(prompt_tokens, output_tokens,
                                                             cached=cached, thoughts=thoughts)}
    chunks[-1]["candidates"][0]["finishReason"] = finish_reason
    return [_sse(c) for c in chunks]


def gemini_sse_error(status: int, message: str, *, after: str = "") -> list[str]:
    """A 200 stream whose next chunk is an error object (what genai raises mid-stream)."""
    head = gemini_sse(after)[:1] if after else []
    return head + [_sse(error_body("gemini", status, message))]


def unsupported_param_reply(provider: Provider, param: str, *,
                            model: str = "some-model") -> Reply:
    """The 400 each provider sends for a parameter the model does not take, worded as they do.

    openai: max_tokens | temperature | reasoning_effort; anthropic: thinking (no thinking at
    all) | thinking.type.enabled (adaptive only) | temperature; gemini: thinking | thinking_budget.
    """
    if provider == "openai":
        if param == "max_tokens":
            return Reply(400, error_body(
                "openai", 400, "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.", param="max_tokens",
                code="unsupported_parameter"))
        if param == "temperature":
            return Reply(400, error_body(
                "openai", 400, "Unsupported value: 'temperature' does not support 0.0 with this "
                "model. Only the default (1) value is supported.", param="temperature",
                code="unsupported_value"))
        return Reply(400, error_body("openai", 400,
                                     f"Unrecognized request argument supplied: {param}"))
    if provider == "anthropic":
        if param == "thinking":
            return Reply(400, error_body("anthropic", 400,
                                         f"'{model}' does not support thinking."))
        if param == "thinking.type.enabled":
            return Reply(400, error_body(
                "anthropic", 400, '"thinking.type.enabled" is not supported for this model. Use '
                '"thinking.type.adaptive" and "output_config.effort" to control thinking '
                "behavior."))
        return Reply(400, error_body("anthropic", 400, f"`{param}` is deprecated for this model."))
    if param == "thinking_budget":
        return Reply(400, error_body("gemini", 400,
                                     "Thinking budget is not supported for this model."))
    return Reply(400, error_body("gemini", 400, "Unable to submit request because thinking is "
                                 "not supported by this model."))
