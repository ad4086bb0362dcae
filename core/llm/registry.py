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
from core.llm.openai import OpenAIChat
from core.settings import EnvironmentKeys, RunConfig, Settings, run_config
from core.signals import Fatal


LOCAL_TOKENS_PER_SECOND = 5.0
LOCAL_FIRST_TOKEN_SECONDS = 120.0


@dataclass
class OpenAICompatibleChat(OpenAIChat):
    """An OpenAI-compatible server (llama.cpp, vLLM, Ollama, LM Studio, LiteLLM, ...): base URL
    required, key optional.

    Structured output asks for `json_schema` first, as on OpenAI: llama.cpp and vLLM enforce it
    with a grammar, which a small model needs (it ignores a schema given as an instruction). A
    server that refuses it moves that model to `json_object`, then to an instruction
    (`core.llm.quirks`); RESEARCHFLOW_JSON_MODE fixes the mode instead.

    Such a server is often a small machine's CPU: its read timeout allows two minutes to read
    the prompt and 5 tokens a second for the whole output cap (a cloud model: 30 s and 25), so
    a slow local answer is waited for rather than abandoned as a passing fault and asked again
    from the start (measured here: SmolLM2 on one busy core, 30-130 tokens a second of prompt).
    """

    provider: ClassVar[str] = "openai-compatible"
    needs_key: ClassVar[bool] = False
    needs_base_url: ClassVar[bool] = True
    min_output_rate: float | None = LOCAL_TOKENS_PER_SECOND
    first_token_seconds: float = LOCAL_FIRST_TOKEN_SECONDS


BACKENDS: dict[str, type] = {
    cls.provider: cls for cls in (OpenAIChat, OpenAICompatibleChat, AnthropicChat, GeminiChat)}


def parse_spec(spec: str) -> tuple[str, str]:
    """"provider:model" -> (provider, model); the model part may itself contain colons."""
    provider, sep, model = spec.strip().partition(":")
    if not sep or not provider or not model:
        raise ValueError(f"model spec {spec!r} is not 'provider:model'; "
                         f"known providers: {', '.join(sorted(BACKENDS))}")
    return provider, model


def make_model(spec: str, config: RunConfig | Settings, *, key: SecretStr | None = None,
               keys: EnvironmentKeys | None = None, **options: Any) -> ChatModel:
    """Build the chat model a spec names, with its base URL, timeout, reasoning effort and
    thinking budget from `config`, and its key (`key`, else what `keys` reads: by default the
    environment's).

    Tasks pass their RunConfig; scripts and tests may pass Settings, whose own keys are used.
    The OpenAI backends get `config.json_mode` (RESEARCHFLOW_JSON_MODE; "auto" learns it).
    `options` go to the backend's constructor (e.g. `stream=True`, `json_mode="instruction"`).
    Raises ValueError for an unknown provider, `Fatal` when a required key or URL is missing.
    """
    provider, model = parse_spec(spec)
    cls = BACKENDS.get(provider)
    if cls is None:
        raise ValueError(f"unknown model provider {provider!r} in {spec!r}; "
                         f"known providers: {', '.join(sorted(BACKENDS))}")
    prefix = cls.settings_prefix
    keys = keys or EnvironmentKeys()
    if isinstance(config, Settings):
        key = key or getattr(config, f"{prefix}_api_key", None)
        config = run_config(config)
    else:
        key = key or keys.read(prefix)
    if key is not None and not key.get_secret_value():
        key = None
    base_url = config.base_url(prefix)
    if key is None and cls.needs_key:
        raise Fatal(f"no API key for {provider} (model {spec!r})", provider=provider, model=model,
                    hint=f"set {cls.key_env_var} or RESEARCHFLOW_{cls.key_env_var}"
                    + keys.elsewhere(prefix))
    if base_url is None and cls.needs_base_url:
        env = f"{prefix.upper()}_BASE_URL"
        raise Fatal(f"no base URL for {provider} (model {spec!r})", provider=provider,
                    model=model, hint=f"set {env} or RESEARCHFLOW_{env} to the server's /v1 URL")
    fields = {"model": model, "api_key": key, "base_url": base_url,
              "timeout": config.request_timeout, "reasoning_effort": config.reasoning_effort,
              "thinking_budget": config.thinking_budget}
    if issubclass(cls, OpenAIChat):  # the one backend with a choice of JSON modes
        fields["json_mode"] = config.json_mode
    return cls(**(fields | options))  # options may override, e.g. a shorter timeout
