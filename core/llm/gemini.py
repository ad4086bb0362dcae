"""Gemini backend (Gemini Developer API through `google-genai`).

`GeminiChat` calls `models.generate_content` with SDK retries off (one attempt; Prefect retries)
and the timeout in milliseconds, as `HttpOptions` wants. Transcripts are flattened to alternating
user/model text turns the same way as for Anthropic (`core.llm.anthropic.text_turns`), so tool
calls never need declared functions. Structured output uses `response_mime_type` plus
`response_json_schema` (plain JSON Schema; the older `response_schema` takes only an OpenAPI
subset). Errors are classified by `core.signals`, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from core.llm.anthropic import text_turns
from core.llm.base import Completion, SDKBackend, Usage, add_counts, count, read
from core.models import Message


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

    def _build_client(self) -> Any:
        from google import genai  # imported on first use
        from google.genai import types

        http = types.HttpOptions(
            base_url=self.base_url, timeout=int(self.timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=1))
        return genai.Client(
            vertexai=False, http_options=http,
            api_key=self.api_key.get_secret_value() if self.api_key else None)

    def request(self, messages: Sequence[Message], *, max_tokens: int,
                json_schema: dict[str, Any] | None = None,
                temperature: float = 0.0) -> dict[str, Any]:
        """The keyword arguments for `models.generate_content` (no I/O; tests read it)."""
        system, turns = text_turns(messages)
        config: dict[str, Any] = {"max_output_tokens": max_tokens, "temperature": temperature}
        if system:
            config["system_instruction"] = system
        if json_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = json_schema
        contents = [{"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
                    for role, text in turns]
        return {"model": self.model, "contents": contents, "config": config}

    def _send(self, params: dict[str, Any]) -> Any:
        return self._sdk().models.generate_content(**params)

    def _parse(self, response: Any, json_schema: dict[str, Any] | None) -> Completion:
        return Completion(text=_text(response), model=response.model_version or self.model,
                          usage=gemini_usage(response.usage_metadata),
                          finish_reason=_finish_reason(response))
