"""The one small protocol every chat model backend implements.

A backend turns a list of `Message`s into a `Completion`. It builds its SDK client lazily, wraps
every SDK call in `core.signals.translate_errors`, and reports token usage when the provider does
(the token estimator calibrates itself from it). Backends register themselves by provider name in
`core.llm.registry`; nothing here knows about any particular provider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

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
