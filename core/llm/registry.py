"""Chat model backends by provider name, and `make_model` to build one from a spec string.

A spec is "provider:model", e.g. "openai:gpt-5.4-mini", "anthropic:claude-sonnet-5",
"gemini:gemini-3.5-flash" or "openai-compatible:llama3.1" (the OpenAI backend pointed at
`settings.openai_base_url`, key optional). Each backend class declares which Settings fields it
reads (`settings_prefix` -> `<prefix>_api_key`, `<prefix>_base_url`) and whether it needs them,
so adding a provider is one entry in `BACKENDS`. Building a model does no I/O: clients are built
on first call. The offline engine is not a chat model and is not registered here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import SecretStr

from core.llm.anthropic import AnthropicChat
from core.llm.base import ChatModel
from core.llm.gemini import GeminiChat
from core.llm.openai import JsonMode, OpenAIChat
from core.settings import Settings
from core.overflow.signals import Fatal


@dataclass
class OpenAICompatibleChat(OpenAIChat):
    """An OpenAI-compatible server (vLLM, Ollama, LiteLLM, ...): base URL required, key optional.

    JSON mode defaults to `json_object` plus an instruction, which far more servers accept than
    `json_schema`; pass `json_mode="json_schema"` to `make_model` for servers that support it.
    """

    provider: ClassVar[str] = "openai-compatible"
    needs_key: ClassVar[bool] = False
    needs_base_url: ClassVar[bool] = True
    json_mode: JsonMode = "json_object"


BACKENDS: dict[str, type] = {
    cls.provider: cls for cls in (OpenAIChat, OpenAICompatibleChat, AnthropicChat, GeminiChat)}


def parse_spec(spec: str) -> tuple[str, str]:
    """"provider:model" -> (provider, model); the model part may itself contain colons."""
    provider, sep, model = spec.strip().partition(":")
    if not sep or not provider or not model:
        raise ValueError(f"model spec {spec!r} is not 'provider:model'; "
                         f"known providers: {', '.join(sorted(BACKENDS))}")
    return provider, model


def make_model(spec: str, settings: Settings, **options: Any) -> ChatModel:
    """Build the chat model a spec names, with its key, base URL, timeout, reasoning effort and
    thinking budget from `settings`.

    `options` go to the backend's constructor (e.g. `stream=True`, `json_mode="instruction"`).
    Raises ValueError for an unknown provider, `Fatal` when a required key or URL is missing.
    """
    provider, model = parse_spec(spec)
    cls = BACKENDS.get(provider)
    if cls is None:
        raise ValueError(f"unknown model provider {provider!r} in {spec!r}; "
                         f"known providers: {', '.join(sorted(BACKENDS))}")
    prefix = cls.settings_prefix
    key: SecretStr | None = getattr(settings, f"{prefix}_api_key", None)
    if key is not None and not key.get_secret_value():
        key = None
    base_url: str | None = getattr(settings, f"{prefix}_base_url", None) or None
    if key is None and cls.needs_key:
        raise Fatal(f"no API key for {provider} (model {spec!r})", provider=provider, model=model,
                    hint=f"set {cls.key_env_var} or RESEARCHFLOW_{cls.key_env_var}")
    if base_url is None and cls.needs_base_url:
        env = f"{prefix.upper()}_BASE_URL"
        raise Fatal(f"no base URL for {provider} (model {spec!r})", provider=provider,
                    model=model, hint=f"set {env} or RESEARCHFLOW_{env} to the server's /v1 URL")
    fields = {"model": model, "api_key": key, "base_url": base_url,
              "timeout": settings.request_timeout,
              "reasoning_effort": settings.reasoning_effort,
              "thinking_budget": settings.thinking_budget}
    return cls(**(fields | options))  # options may override, e.g. a shorter timeout


# A cheaper model of the same provider for bulk work (condensing every page), by exact model
# name or its dated snapshot ("claude-sonnet-4-5-20250929"). A model not listed is its own.
CHEAPER = {
    "openai": {"gpt-4o": "gpt-4o-mini", "gpt-4.1": "gpt-4.1-mini", "gpt-4.1-mini": "gpt-4.1-nano",
               "gpt-5": "gpt-5-mini", "gpt-5.1": "gpt-5-mini", "gpt-5-mini": "gpt-5-nano",
               "gpt-5.4": "gpt-5.4-mini", "gpt-5.4-mini": "gpt-5.4-nano",
               "gpt-5.5": "gpt-5.4-mini"},
    "anthropic": {"claude-sonnet-5": "claude-haiku-4-5", "claude-sonnet-5-5": "claude-haiku-4-5",
                  "claude-opus-5": "claude-haiku-4-5", "claude-sonnet-4-6": "claude-haiku-4-5",
                  "claude-sonnet-4-5": "claude-haiku-4-5", "claude-sonnet-4": "claude-haiku-4-5",
                  "claude-opus-4-5": "claude-haiku-4-5", "claude-opus-4-1": "claude-haiku-4-5",
                  "claude-3-7-sonnet": "claude-3-5-haiku"},
    "gemini": {"gemini-2.5-pro": "gemini-2.5-flash", "gemini-2.5-flash": "gemini-2.5-flash-lite",
               "gemini-3-pro-preview": "gemini-2.5-flash", "gemini-3.5-flash": "gemini-3.1-flash-lite",
               "gemini-3.1-pro-preview": "gemini-3.5-flash"},
}


def cheaper(spec: str) -> str:
    """The cheaper sibling of a model spec, or the spec itself."""
    provider, model = parse_spec(spec)
    siblings = CHEAPER.get(provider, {})
    for name, sibling in siblings.items():
        if model == name or model.startswith(f"{name}-20"):
            return f"{provider}:{sibling}"
    return spec

