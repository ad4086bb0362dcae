"""Gemini backend (Gemini Developer API through `google-genai`).

`GeminiChat` calls `models.generate_content` with SDK retries off (one attempt; Prefect retries)
and the timeout in milliseconds, as `HttpOptions` wants. Transcripts are flattened to alternating
user/model text turns the same way as for Anthropic (`core.llm.anthropic.text_turns`), so tool
calls never need declared functions. Structured output uses `response_mime_type` plus
`response_json_schema` (plain JSON Schema; the older `response_schema` takes only an OpenAPI
subset). Errors are classified by `core.signals`, not here.

Thinking counts against `max_output_tokens`, so the cap sent is the answer's budget plus the
thinking allowance: `thinking_budget` when set (sent as `thinking_config.thinking_budget`; 0
turns thinking off where the model allows it), else, for models that think by default (2.5
Pro and Flash, every Gemini 3), `DEFAULT_THINKING_ALLOWANCE`. A model seen thinking unasked
gets the allowance from then on. Gemini 3 keeps its default temperature (Google: "we strongly
recommend keeping the temperature parameter at its default value of 1.0"; lower values may
cause looping), so no temperature is sent to it. Long outputs stream (`:streamGenerateContent`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from core.llm.anthropic import text_turns
from core.llm.base import Completion, SDKBackend, Usage, add_counts, count, read, split_cap
from core.models import Message

# Google's thinking guide: with no budget set, 2.5 Pro and Flash think dynamically, "Auto (up to
# 8,192 tokens)"; Gemini 3 thinks at its default level. This is the room left for it.
DEFAULT_THINKING_ALLOWANCE = 8_192
_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")


def _version(model: str) -> tuple[int, int] | None:
    m = _VERSION.match(model.rsplit("/", 1)[-1].lower())  # "models/gemini-2.5-pro"
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def thinks_by_default(model: str) -> bool:
    """Gemini 2.5 Pro and Flash and every Gemini 3 think unless told not to (2.5 Flash-Lite
    and the image models do not)."""
    version = _version(model)
    if version is None or version < (2, 5):
        return False
    name = model.lower()
    return version >= (3, 0) or not ("flash-lite" in name or "image" in name)


def keeps_default_temperature(model: str) -> bool:
    """Gemini 3 and later: tuned for temperature 1.0; Google advises against lowering it."""
    version = _version(model)
    return version is not None and version >= (3, 0)


def _finish_reason(response: Any) -> str | None:
    candidates = response.candidates or []
    if candidates and candidates[0].finish_reason is not None:
        reason = candidates[0].finish_reason
        return getattr(reason, "value", None) or str(reason)
    feedback = response.prompt_feedback  # no candidates: the prompt itself was blocked
    if feedback is not None and feedback.block_reason is not None:
        return f"BLOCKED_{getattr(feedback.block_reason, 'value', feedback.block_reason)}"
    return None


def gemini_usage(meta: Any) -> Usage:
    """generateContent `usageMetadata` as a `Usage`.

    `promptTokenCount` includes the cached content; tool-use prompt tokens are input too. Thought
    tokens are billed as output but reported beside `candidatesTokenCount`, so they are added.
    """
    thoughts = count(read(meta, "thoughts_token_count"))
    return Usage(
        input_tokens=add_counts(count(read(meta, "prompt_token_count")),
                                count(read(meta, "tool_use_prompt_token_count"))),
        output_tokens=add_counts(count(read(meta, "candidates_token_count")), thoughts),
        cached_input_tokens=count(read(meta, "cached_content_token_count")),
        reasoning_tokens=thoughts)


def _text(response: Any) -> str:
    # Not `response.text`: it warns on non-text parts and would include thought summaries.
    candidates = response.candidates or []
    if not candidates or candidates[0].content is None:
        return ""
    return "".join(p.text for p in candidates[0].content.parts or ()
                   if p.text and not p.thought)


@dataclass
class GeminiChat(SDKBackend):
    """Gemini through `generate_content`. The client is built on first use."""

    provider: ClassVar[str] = "gemini"
    key_env_var: ClassVar[str | None] = "GEMINI_API_KEY"
    settings_prefix: ClassVar[str] = "gemini"
    # Gemini's limit is on input tokens; the output is capped on its own (maxOutputTokens).
    window_includes_output: ClassVar[bool] = False

    def _build_client(self) -> Any:
        from google import genai  # imported on first use
        from google.genai import types

        http = types.HttpOptions(
            base_url=self.base_url, timeout=int(self.timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1))
        return genai.Client(
            vertexai=False, http_options=http,
            api_key=self.api_key.get_secret_value() if self.api_key else None)

    def _thinking(self, max_tokens: int) -> tuple[int, dict[str, Any] | None]:
        """(max_output_tokens to send, the `thinking_config` or None)."""
        form = self.form()
        if self.thinking_budget is not None and form.thinking != "off":
            cap, budget = split_cap(self.model, max_tokens, self.thinking_budget)
            return cap, {"thinking_budget": budget}
        if thinks_by_default(self.model) or form.thinks:
            return split_cap(self.model, max_tokens, DEFAULT_THINKING_ALLOWANCE)[0], None
        return max_tokens, None

    def output_cap(self, max_tokens: int) -> int:
        return self._thinking(max_tokens)[0]

    def request(self, messages: Sequence[Message], *, max_tokens: int,
                json_schema: dict[str, Any] | None = None,
                temperature: float = 0.0) -> dict[str, Any]:
        """The keyword arguments for `models.generate_content` (no I/O; tests read it)."""
        system, turns = text_turns(messages)
        cap, thinking = self._thinking(max_tokens)
        config: dict[str, Any] = {"max_output_tokens": cap}
        if not keeps_default_temperature(self.model) and self.form().temperature:
            config["temperature"] = temperature
        if thinking is not None:
            config["thinking_config"] = thinking
        if self.read_timeout(cap) > self.timeout:  # HttpOptions counts milliseconds
            config["http_options"] = {"timeout": int(self.read_timeout(cap) * 1000)}
        if system:
            config["system_instruction"] = system
        if json_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = json_schema
        contents = [{"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
                    for role, text in turns]
        params = {"model": self.model, "contents": contents, "config": config}
        if self.streams(cap):
            params["stream"] = True  # read by _send: generate_content_stream, collected
        return params

    def _send(self, params: dict[str, Any]) -> Any:
        params = dict(params)
        if params.pop("stream", False):
            return self._collect(self._sdk().models.generate_content_stream(**params))
        return self._sdk().models.generate_content(**params)

    def _parse(self, response: Any, json_schema: dict[str, Any] | None) -> Completion:
        if isinstance(response, Completion):  # a stream, already collected
            completion = response
        else:
            completion = Completion(text=_text(response),
                                    model=response.model_version or self.model,
                                    usage=gemini_usage(response.usage_metadata),
                                    finish_reason=_finish_reason(response))
        self._notice_thinking(completion.usage)
        return completion

    def _collect(self, stream: Any) -> Completion:
        """Read a stream to its end (an error chunk raises here, inside translate_errors):
        the text of every chunk without thoughts, the last finish reason and usage stated."""
        parts: list[str] = []
        finish: str | None = None
        model = self.model
        usage = Usage()
        for chunk in stream:
            parts.append(_text(chunk))
            model = chunk.model_version or model
            finish = _finish_reason(chunk) or finish  # mid-stream chunks state none
            if chunk.usage_metadata is not None:  # cumulative: the latest is the total
                latest = gemini_usage(chunk.usage_metadata)
                if latest.reported or not usage.reported:
                    usage = latest
        return Completion(text="".join(parts), model=model, usage=usage, finish_reason=finish)

    def _notice_thinking(self, usage: Usage) -> None:
        """A model that thought though nobody asked (and no allowance was left) gets one."""
        if usage.reasoning_tokens and self.thinking_budget is None \
                and not thinks_by_default(self.model) and not self.form().thinks:
            self.quirks.learn(self.provider, self.model, "thinks")
