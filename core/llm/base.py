"""The one small protocol every chat model backend implements.

A backend turns a list of `Message`s into a `Completion`. It builds its SDK client lazily, wraps
every SDK call in `core.signals.translate_errors`, and reports token usage when the provider does
(the token estimator calibrates itself from it). Backends register themselves by provider name in
`core.llm.registry`; nothing here knows about any particular provider.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Sequence, runtime_checkable

from pydantic import SecretStr

from core.models import Message
from core.signals import translate_errors


@dataclass(frozen=True)
class Usage:
    """The tokens a provider billed for one call, from its own usage fields (None: not said).

    Normalised across providers: `input_tokens` and `output_tokens` are totals, and the cached
    and reasoning counts are parts of them (not extra), whatever the provider's own layout.
    """

    input_tokens: int | None = None  # all input tokens, cached ones included
    output_tokens: int | None = None  # all billed output tokens, reasoning/thinking included
    cached_input_tokens: int | None = None  # part of input served from the prompt cache
    reasoning_tokens: int | None = None  # part of output spent on reasoning/thinking

    @property
    def reported(self) -> bool:
        """Whether the provider gave input or output counts (else estimate them)."""
        return self.input_tokens is not None or self.output_tokens is not None


def read(obj: Any, name: str) -> Any:
    """A usage field by name, from an SDK object or a plain dict; None when absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def count(value: Any) -> int | None:
    """A token count from a usage field: an int, or None when missing, null or not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def add_counts(*values: int | None) -> int | None:
    """The sum of the counts given, or None when none was."""
    given = [v for v in values if v is not None]
    return sum(given) if given else None


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
    simonw/llm's plugins), builds its client in `_build_client()` and implements the request,
    send and parse steps.
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
    _client_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                         compare=False)

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 json_schema: dict[str, Any] | None = None,
                 temperature: float = 0.0) -> Completion:
        params = self.request(messages, max_tokens=max_tokens, json_schema=json_schema,
                              temperature=temperature)
        with translate_errors(model=self.model):  # the one place SDK errors become signals
            response = self._send(params)
        return self._parse(response, json_schema)

    def _sdk(self) -> Any:
        """The SDK client, built once even when worker threads ask at the same moment: a
        second client would replace the first mid-call, and google-genai closes a client's
        transport when the client object is collected ("client has been closed")."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._build_client()
        return self._client

    def _build_client(self) -> Any:
        raise NotImplementedError

    def request(self, messages: Sequence[Message], *, max_tokens: int,
                json_schema: dict[str, Any] | None, temperature: float) -> dict[str, Any]:
        """The SDK call's keyword arguments (no I/O, so tests can read them)."""
        raise NotImplementedError

    def _send(self, params: dict[str, Any]) -> Any:
        """Make the SDK call; a streamed reply is read to its end here, so its errors count."""
        raise NotImplementedError

    def _parse(self, response: Any, json_schema: dict[str, Any] | None) -> Completion:
        raise NotImplementedError
