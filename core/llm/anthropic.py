"""Anthropic Messages backend.

`AnthropicChat` calls `messages.create` through the official `anthropic` SDK with SDK retries off
(Prefect retries). It does not classify errors (`core.signals` does) nor validate output.

Two choices worth knowing:
- Tool calls and results in our transcripts are flattened to text turns. Faithful `tool_use` /
  `tool_result` blocks would oblige every request to declare those tools and invite the model to
  call them again; text keeps the content and always makes a valid request. `text_turns` also
  merges same-role neighbours and starts with a user turn, as the API requires (Gemini reuses it).
- Structured output is a forced tool call (`tools=[emit]`, `tool_choice=emit`): the tool's input
  is the JSON, which is more reliable than asking for JSON in prose. A schema whose top level is
  not an object is wrapped in `{"value": ...}` (tool inputs must be objects) and unwrapped.
  Extended thinking forbids forcing a tool ("Thinking may not be enabled when tool_choice forces
  tool use"), so with thinking on the tool is offered (`tool_choice=auto`) and the system prompt
  asks for it; an answer in prose instead comes back as text for the caller to validate.

Extended thinking (`thinking_budget`, at least 1,024 tokens as the API requires) is sent as
`thinking={"type": "enabled", "budget_tokens": N}` and `max_tokens` becomes answer + N, since
thinking counts against it. A model that refuses a fixed budget ("Use thinking.type.adaptive")
gets `{"type": "adaptive"}`, one that cannot think gets none (`core.llm.quirks`). No
`temperature` is ever sent: this SDK no longer takes sampling parameters, and models from Opus
4.7 on refuse them. Long outputs stream (`messages.stream`, collected to the final message).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Sequence

from core.llm.base import Completion, SDKBackend, Usage, add_counts, count, read, split_cap
from core.models import Message

TurnRole = Literal["user", "assistant"]
EMIT_TOOL = "emit"
MIN_THINKING_BUDGET = 1_024  # the API's minimum budget_tokens
_EMIT_INSTRUCTION = (f"Give your final answer by calling the `{EMIT_TOOL}` tool exactly once, "
                     "with the answer as its input; do not answer in prose.")
_EMPTY = "(empty)"  # the API rejects empty text blocks
_OPENER = "(conversation continues)"  # the API wants a user turn first


def _flatten(m: Message) -> tuple[TurnRole, str]:
    if m.role == "tool":
        label = " ".join(filter(None, ["[tool result", m.tool_call_id, m.name])) + "]"
        return "user", f"{label}\n{m.content}"
    if m.role == "assistant":
        calls = [f"[tool call {c.id}] {c.name}({json.dumps(c.arguments, ensure_ascii=False)})"
                 for c in m.tool_calls]
        return "assistant", "\n".join(filter(None, [m.content, *calls]))
    return "user", m.content


def text_turns(messages: Sequence[Message]) -> tuple[str, list[tuple[TurnRole, str]]]:
    """(system text, alternating user/assistant text turns starting with user).

    Every system message goes to the system text, in order; tool calls become text on the
    assistant turn, tool results become user turns; consecutive same-role turns are merged.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[tuple[TurnRole, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        role, text = _flatten(m)
        text = text or _EMPTY
        if turns and turns[-1][0] == role:
            turns[-1] = (role, f"{turns[-1][1]}\n\n{text}")
        else:
            turns.append((role, text))
    if not turns or turns[0][0] != "user":
        turns.insert(0, ("user", _OPENER))
    if turns[-1][0] == "assistant":
        # A final assistant turn is a prefill; the API rejects one ending in whitespace.
        turns[-1] = ("assistant", turns[-1][1].rstrip() or _EMPTY)
    return system, turns


def anthropic_usage(usage: Any) -> Usage:
    """Messages API `usage` as a `Usage`.

    Anthropic's `input_tokens` is only the uncached part: the cache reads and cache writes are
    reported beside it, and all three are billed input. `output_tokens` already includes any
    thinking; `output_tokens_details.thinking_tokens` splits it out where the API sends it.
    """
    cache_read = count(read(usage, "cache_read_input_tokens"))
    return Usage(
        input_tokens=add_counts(count(read(usage, "input_tokens")), cache_read,
                                count(read(usage, "cache_creation_input_tokens"))),
        output_tokens=count(read(usage, "output_tokens")),
        cached_input_tokens=cache_read,
        reasoning_tokens=count(read(read(usage, "output_tokens_details"), "thinking_tokens")))


def _nonstreaming_limit(model: str) -> float:
    """The SDK's own cap on non-streamed output for this model, when it keeps one. The SDK only
    enforces it with its default timeout (we set ours), so it is honoured here instead."""
    try:
        from anthropic._constants import MODEL_NONSTREAMING_TOKENS  # private, hence the guard
    except ImportError:  # pragma: no cover - a future SDK without the table
        return float("inf")
    return MODEL_NONSTREAMING_TOKENS.get(model, float("inf"))


def _tool_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(input_schema for the emit tool, whether the answer is wrapped in {"value": ...})."""
    if schema.get("type") == "object" or ("properties" in schema and "type" not in schema):
        return schema, False
    return {"type": "object", "properties": {"value": schema}, "required": ["value"]}, True


@dataclass
class AnthropicChat(SDKBackend):
    """Claude through the Messages API. The client is built on first use."""

    provider: ClassVar[str] = "anthropic"
    key_env_var: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    settings_prefix: ClassVar[str] = "anthropic"

    def _build_client(self) -> Any:
        import anthropic  # imported on first use

        return anthropic.Anthropic(
            api_key=self.api_key.get_secret_value() if self.api_key else None,
            base_url=self.base_url, timeout=self.timeout, max_retries=0)

    def _thinking(self, max_tokens: int) -> tuple[int, dict[str, Any] | None]:
        """(max_tokens to send, the `thinking` parameter or None)."""
        mode = self.form().thinking
        if not self.thinking_budget or mode == "off":
            return max_tokens, None
        budget = max(MIN_THINKING_BUDGET, self.thinking_budget)
        cap, budget = split_cap(self.model, max_tokens, budget, minimum=MIN_THINKING_BUDGET)
        if mode == "adaptive":
            return cap, {"type": "adaptive"}
        return cap, {"type": "enabled", "budget_tokens": budget}

    def output_cap(self, max_tokens: int) -> int:
        return self._thinking(max_tokens)[0]

    def streams(self, output_cap: int) -> bool:
        """Above our threshold, or above what the SDK itself lets this model answer without
        streaming (its MODEL_NONSTREAMING_TOKENS: 8,192 for Opus 4 and 4.1 snapshots)."""
        return super().streams(output_cap) or output_cap > _nonstreaming_limit(self.model)

    def request(self, messages: Sequence[Message], *, max_tokens: int,
                json_schema: dict[str, Any] | None = None,
                temperature: float = 0.0) -> dict[str, Any]:
        """The keyword arguments for `messages.create` (no I/O; tests read it)."""
        system, turns = text_turns(messages)
        cap, thinking = self._thinking(max_tokens)
        # No `temperature`: this SDK (2.15) no longer accepts sampling parameters.
        params: dict[str, Any] = {
            "model": self.model, "max_tokens": cap,
            "messages": [{"role": role, "content": text} for role, text in turns]}
        if thinking is not None:
            params["thinking"] = thinking
        if json_schema is not None:
            input_schema, _ = _tool_schema(json_schema)
            params["tools"] = [{"name": EMIT_TOOL, "input_schema": input_schema,
                                "description": "Return the answer as a JSON object that "
                                               "matches the input schema."}]
            if thinking is None:
                params["tool_choice"] = {"type": "tool", "name": EMIT_TOOL}
            else:  # thinking refuses a forced tool: offer it and ask for it
                params["tool_choice"] = {"type": "auto"}
                system = "\n\n".join(filter(None, [system, _EMIT_INSTRUCTION]))
        if system:
            params["system"] = system
        if self.streams(cap):
            params["stream"] = True  # read by _send: messages.stream() collects the events
        if self.read_timeout(cap) > self.timeout:
            params["timeout"] = self.read_timeout(cap)
        return params

    def _send(self, params: dict[str, Any]) -> Any:
        import anthropic

        params = dict(params)
        if "timeout" in params:  # a longer read, but connecting keeps the configured timeout
            params["timeout"] = anthropic.Timeout(params["timeout"],
                                                  connect=min(self.timeout, params["timeout"]))
        if params.pop("stream", False):
            # The SDK's own accumulator: text, tool input JSON and the cumulative usage of the
            # closing message_delta; an `error` event raises here, inside translate_errors.
            with self._sdk().messages.stream(**params) as stream:
                return stream.get_final_message()
        return self._sdk().messages.create(**params)

    def _parse(self, response: Any, json_schema: dict[str, Any] | None) -> Completion:
        text = "".join(b.text for b in response.content if b.type == "text")
        if json_schema is not None:
            emitted = [b.input for b in response.content
                       if b.type == "tool_use" and b.name == EMIT_TOOL]
            if emitted:  # else fall back to whatever text came (the caller validates)
                wrapped = _tool_schema(json_schema)[1]
                value = emitted[0].get("value") if wrapped else emitted[0]
                text = json.dumps(value, ensure_ascii=False)
        return Completion(
            text=text, model=response.model or self.model,
            usage=anthropic_usage(getattr(response, "usage", None)),
            finish_reason=response.stop_reason)
