"""OpenAI Chat Completions backend, also for OpenAI-compatible servers.

One `OpenAIChat` speaks the Chat Completions API through the official `openai` SDK, so the same
class serves OpenAI and any server that copies its wire format (vLLM, Ollama, Groq, OpenRouter,
LiteLLM, Azure) via `base_url`. It does not retry (Prefect does: `max_retries=0`), does not
validate structured output (the caller parses), and does not classify errors (`core.signals` does).

Structured output is one of three modes: "json_schema" (native, grammar-constrained on llama.cpp
and vLLM), "json_object" (JSON mode plus the schema as an instruction), "instruction" (the schema
as an instruction only). `json_mode="auto"` (the default) asks for json_schema first and steps
down when the server refuses it (`core.llm.quirks` learns that per model); any other value is
the user's choice (RESEARCHFLOW_JSON_MODE) and is sent as is.

Reasoning models (o-series, gpt-5) take `max_completion_tokens`, which covers their reasoning as
well as the answer, and refuse `max_tokens` and any temperature but the default. The name is
only the first guess: a model that refuses `max_tokens` is a reasoning model from then on
(`core.llm.quirks`), and gets the reasoning allowance (`REASONING_ALLOWANCE`, or
`thinking_budget` when set) on top of the answer's budget. `reasoning_effort` is sent when set,
unless the model refused it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Sequence

from core.llm.base import Completion, SDKBackend, Usage, count, read, split_cap
from core.llm.quirks import JsonMode
from core.models import Message

JsonSetting = Literal["auto", "json_schema", "json_object", "instruction"]

# The first guess only (see the module docstring): models named so refuse `max_tokens` and any
# temperature but the default.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
# Room for reasoning tokens added to max_completion_tokens, by reasoning_effort (None: OpenAI's
# default, medium). OpenAI's reasoning guide warns that reasoning counts against
# max_completion_tokens and a small cap ends in an empty "length" reply; these leave room for
# typical reasoning at each effort while keeping the request inside the context window.
REASONING_ALLOWANCE = {"minimal": 1_024, "low": 4_096, "medium": 8_192, "high": 16_384}


def json_instruction(schema: dict[str, Any]) -> str:
    """The plain-text request for JSON, for providers or servers without structured output."""
    return ("Respond with only a JSON object matching this JSON schema, with no prose and no "
            "code fences:\n" + json.dumps(schema, ensure_ascii=False))


def is_reasoning_model(model: str) -> bool:
    """The name's guess; `OpenAIChat.reasoning()` also knows what the API said."""
    name = model.rsplit("/", 1)[-1].lower()  # "openai/o3-mini" on routers
    return name.startswith(_REASONING_PREFIXES)


def _schema_name(schema: dict[str, Any]) -> str:
    # OpenAI wants ^[a-zA-Z0-9_-]{1,64}$ here; a pydantic title usually fits.
    title = str(schema.get("title") or "response")
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in title)[:64]
    return name or "response"


def openai_usage(usage: Any) -> Usage:
    """Chat Completions `usage` as a `Usage`; OpenAI-compatible servers may omit or null any of it.

    `prompt_tokens` already includes the cached part and `completion_tokens` the reasoning part.
    """
    return Usage(
        input_tokens=count(read(usage, "prompt_tokens")),
        output_tokens=count(read(usage, "completion_tokens")),
        cached_input_tokens=count(read(read(usage, "prompt_tokens_details"), "cached_tokens")),
        reasoning_tokens=count(read(read(usage, "completion_tokens_details"),
                                    "reasoning_tokens")))


def _answered_ids(messages: Sequence[Message], start: int) -> set[str]:
    """Ids answered by the run of tool messages right after position `start`."""
    ids: set[str] = set()
    for m in messages[start + 1:]:
        if m.role != "tool":
            break
        if m.tool_call_id:
            ids.add(m.tool_call_id)
    return ids


def _call_text(call: Any) -> str:
    return f"[tool call {call.id}] {call.name}({json.dumps(call.arguments, ensure_ascii=False)})"


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our transcript in Chat Completions shape.

    Tool calls and results map one to one. A call with no result right after it, or a result
    whose call is not right before it, is rejected by the API with a 400; rather than fail, such
    orphans become plain text turns (shrinking should never create them, this is the safety net).
    """
    out: list[dict[str, Any]] = []
    open_ids: set[str] = set()  # calls of the latest assistant turn still awaiting results
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_calls:
            answered = _answered_ids(messages, i)
            kept = [c for c in m.tool_calls if c.id in answered]
            orphans = [_call_text(c) for c in m.tool_calls if c.id not in answered]
            content = "\n".join(filter(None, [m.content, *orphans])) or None
            turn: dict[str, Any] = {"role": "assistant", "content": content}
            if kept:
                turn["tool_calls"] = [
                    {"id": c.id, "type": "function",
                     "function": {"name": c.name,
                                  "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                    for c in kept]
            open_ids = {c.id for c in kept}
            out.append(turn)
        elif m.role == "tool":
            if m.tool_call_id in open_ids:
                out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
                open_ids.discard(m.tool_call_id)  # a second answer to one call is an orphan
            else:
                label = " ".join(filter(None, ["[tool result", m.tool_call_id, m.name])) + "]"
                out.append({"role": "user", "content": f"{label}\n{m.content}"})
        else:
            open_ids = set()
            # `name` is dropped: OpenAI restricts its characters and some servers reject it.
            out.append({"role": m.role, "content": m.content})
    return out


@dataclass
class OpenAIChat(SDKBackend):
    """Chat Completions through the official SDK. The client is built on first use."""

    provider: ClassVar[str] = "openai"
    key_env_var: ClassVar[str | None] = "OPENAI_API_KEY"
    settings_prefix: ClassVar[str] = "openai"  # reads openai_api_key / openai_base_url
    can_stream: ClassVar[bool] = True

    json_mode: JsonSetting = "auto"
    # Some servers report an overflow inside a 200 SSE stream; streaming lets us see it.
    stream: bool = False

    def _build_client(self) -> Any:
        import openai  # imported on first use: keeps `import core.llm...` cheap

        key = self.api_key.get_secret_value() if self.api_key else "not-needed"
        return openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout,
                             max_retries=0)

    def reasoning(self) -> bool:
        """Whether this model reasons before answering: by name, or because it refused
        `max_tokens` (only reasoning models insist on `max_completion_tokens`)."""
        learned = self.form().token_param
        return learned == "max_completion_tokens" or (learned is None
                                                       and is_reasoning_model(self.model))

    def structured_mode(self) -> JsonMode:
        """How a schema is asked for: the configured mode, else what the server has accepted
        so far (json_schema until it refuses)."""
        if self.json_mode != "auto":
            return self.json_mode
        return self.form().json_mode or "json_schema"

    def output_cap(self, max_tokens: int) -> int:
        if not self.reasoning():
            return max_tokens
        allowance = self.thinking_budget if self.thinking_budget is not None \
            else REASONING_ALLOWANCE[self.reasoning_effort or "medium"]
        return split_cap(self.model, max_tokens, allowance)[0]

    def request(self, messages: Sequence[Message], *, max_tokens: int,
                json_schema: dict[str, Any] | None = None,
                temperature: float = 0.0) -> dict[str, Any]:
        """The keyword arguments for `chat.completions.create` (no I/O; tests read it)."""
        wire = to_openai_messages(messages)
        form = self.form()
        guessed = is_reasoning_model(self.model)
        cap = self.output_cap(max_tokens)
        params: dict[str, Any] = {"model": self.model}
        token_param = form.token_param or ("max_completion_tokens" if guessed else "max_tokens")
        params[token_param] = cap
        if form.temperature and not guessed:
            params["temperature"] = temperature
        if self.reasoning_effort and form.reasoning_effort:
            params["reasoning_effort"] = self.reasoning_effort
        if json_schema is not None:
            mode = self.structured_mode()
            if mode == "json_schema":
                params["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": _schema_name(json_schema), "schema": json_schema, "strict": False}}
            else:
                if mode == "json_object":
                    params["response_format"] = {"type": "json_object"}
                wire.append({"role": "system", "content": json_instruction(json_schema)})
        if self.stream or self.streams(cap):
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        if self.read_timeout(cap) > self.timeout:
            params["timeout"] = self.read_timeout(cap)
        params["messages"] = wire
        return params

    def _send(self, params: dict[str, Any]) -> Any:
        import openai

        if "timeout" in params:  # a longer read, but connecting keeps the configured timeout
            params = {**params, "timeout": openai.Timeout(
                params["timeout"], connect=min(self.timeout, params["timeout"]))}
        response = self._sdk().chat.completions.create(**params)
        return self._collect(response) if params.get("stream") else response

    def _parse(self, response: Any, json_schema: dict[str, Any] | None) -> Completion:
        if isinstance(response, Completion):  # a stream, already collected
            return response
        choice = response.choices[0] if response.choices else None
        return Completion(
            text=(choice.message.content if choice else None) or "",
            model=response.model or self.model,
            usage=openai_usage(getattr(response, "usage", None)),
            finish_reason=choice.finish_reason if choice else None)

    def _collect(self, stream: Any) -> Completion:
        parts: list[str] = []
        finish: str | None = None
        model = self.model
        usage = Usage()
        for chunk in stream:
            model = chunk.model or model
            if getattr(chunk, "usage", None):  # the final chunk (stream_options.include_usage)
                latest = openai_usage(chunk.usage)
                if latest.reported or not usage.reported:  # an empty one must not erase counts
                    usage = latest
            for choice in chunk.choices or ():
                if choice.delta and choice.delta.content:
                    parts.append(choice.delta.content)
                finish = choice.finish_reason or finish
        return Completion(text="".join(parts), model=model, usage=usage, finish_reason=finish)
