"""The one small protocol every chat model backend implements.

A backend turns a list of `Message`s into a `Completion`. It builds its SDK client lazily, wraps
every SDK call in `core.signals.translate_errors`, and reports token usage when the provider does
(the token estimator calibrates itself from it). Backends register themselves by provider name in
`core.llm.registry`; nothing here knows about any particular provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

from pydantic import SecretStr

from core.models import Message


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    usage: Usage = Usage()
    finish_reason: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    provider: ClassVar[str]
    key_env_var: ClassVar[str | None]
    model: str

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 json_schema: dict[str, Any] | None = None,
                 temperature: float = 0.0) -> Completion:
        """One chat completion. Raises a `core.signals.Signal` on any provider failure.

        `json_schema`, when given, asks for a JSON object matching it (structured output where the
        provider supports it, else an instruction); the text of the completion is that JSON.
        """
        ...


@dataclass
class SDKBackend:
    """What every SDK-backed model shares: its settings and a lazily built client.

    A provider subclasses this, declares its capabilities as class attributes (as in
    simonw/llm's plugins), builds its client in `_sdk()` and implements `complete`.
    """

    provider: ClassVar[str]
    key_env_var: ClassVar[str | None] = None
    needs_key: ClassVar[bool] = True
    needs_base_url: ClassVar[bool] = False
    settings_prefix: ClassVar[str] = ""  # reads <prefix>_api_key / <prefix>_base_url
    supports_schema: ClassVar[bool] = True
    can_stream: ClassVar[bool] = False

    model: str
    api_key: SecretStr | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0  # seconds
    _client: Any = field(default=None, init=False, repr=False, compare=False)
