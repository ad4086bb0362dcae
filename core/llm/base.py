"""The one small protocol every chat model backend implements.

A backend turns a list of `Message`s into a `Completion`. It builds its SDK client lazily, wraps
every SDK call in `core.signals.translate_errors`, and reports token usage when the provider does
(the token estimator calibrates itself from it). Backends register themselves by provider name in
`core.llm.registry`; nothing here knows about any particular provider.

What every backend shares beyond that:
- The caller's `max_tokens` is the ANSWER's budget. A model that thinks first (OpenAI reasoning
  models, Claude with extended thinking, Gemini 2.5 and 3) gets its thinking allowance added on
  top (`output_cap`), clamped to the model's known output limit.
- A 400 refusing a parameter as unsupported teaches `core.llm.quirks` the model's supported form;
  `complete` rebuilds the request and sends it again, once per thing learned.
- A long output streams (cap above `stream_above`), and the read timeout grows with the cap
  (`read_timeout`), so a slow reasoning model is not cut off and billed again on retry.
- `Completion.truncated` says the output hit its cap, whatever the provider calls that.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Literal, Protocol, Sequence, runtime_checkable

from pydantic import SecretStr

from core.llm.quirks import Form, Quirks, fix_for
from core.models import Message
from core.overflow.windows import published_max_output
from core.signals import Fatal, translate_errors

ReasoningEffort = Literal["minimal", "low", "medium", "high"]

# Finish reasons that mean "stopped at the output cap": OpenAI "length", Anthropic "max_tokens"
# (and "model_context_window_exceeded" when the window ran out first), Gemini "MAX_TOKENS".
_TRUNCATION = {"length", "max_tokens", "max_output_tokens", "model_context_window_exceeded"}
# A slow reasoning model still writes this many tokens a second; a reply may take this long to
# begin. Together they bound how long a call may take before the read timeout gives up.
_MIN_TOKENS_PER_SECOND = 25.0
_FIRST_TOKEN_SECONDS = 30.0
_MAX_FIXES = 4  # at most this many parameters learned (and calls repeated) in one call


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


def is_truncation(finish_reason: str | None) -> bool:
    """Whether a provider's finish reason means the output stopped at its cap (any case)."""
    return bool(finish_reason) and finish_reason.lower() in _TRUNCATION  # type: ignore[union-attr]


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    usage: Usage = Usage()
    finish_reason: str | None = None  # the provider's own word, as sent

    @property
    def truncated(self) -> bool:
        """The output hit max_tokens (thinking included): the text may be cut mid-way."""
        return is_truncation(self.finish_reason)


def known_max_output(model: str) -> int | None:
    """The largest max_tokens the published table says the model accepts, when it knows."""
    return published_max_output(model)


def split_cap(model: str, answer: int, allowance: int, *, minimum: int = 0) -> tuple[int, int]:
    """(output cap to send, thinking allowance inside it) for an answer budget plus a thinking
    allowance. Above the model's known output limit the allowance shrinks first (not below
    `minimum`), then the answer."""
    allowance = max(0, allowance)
    total = answer + allowance
    limit = known_max_output(model)
    if limit is None or total <= limit:
        return total, allowance
    allowance = min(allowance, max(minimum, limit - answer))
    return limit, min(allowance, limit)


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
    # Whether the context window holds the output too (OpenAI, Anthropic) or the input only.
    window_includes_output: ClassVar[bool] = True
    can_stream: ClassVar[bool] = False

    model: str
    api_key: SecretStr | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0  # seconds; the floor of the read timeout (see read_timeout)
    reasoning_effort: ReasoningEffort | None = None  # OpenAI reasoning models
    thinking_budget: int | None = None  # Gemini thinking_budget, Anthropic budget_tokens
    stream_above: int = 16_384  # output cap (thinking included) above which a call streams
    # The read timeout is at least 30 s + cap / this many tokens a second; None: `timeout` only.
    min_output_rate: float | None = _MIN_TOKENS_PER_SECOND
    first_token_seconds: float = _FIRST_TOKEN_SECONDS  # the prompt read before the first token
    # What the provider taught about this model's requests (core.llm.quirks).
    quirks: Quirks = field(default_factory=Quirks, repr=False, compare=False)
    _client: Any = field(default=None, init=False, repr=False, compare=False)
    _client_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                         compare=False)

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 json_schema: dict[str, Any] | None = None,
                 temperature: float = 0.0) -> Completion:
        def build() -> dict[str, Any]:
            return self.request(messages, max_tokens=max_tokens, json_schema=json_schema,
                                temperature=temperature)

        params = build()
        for _ in range(_MAX_FIXES):
            try:
                return self._call(params, json_schema)
            except Fatal as signal:
                params = self._adapted(signal, params, build)
        return self._call(params, json_schema)

    def _call(self, params: dict[str, Any], json_schema: dict[str, Any] | None) -> Completion:
        with translate_errors(model=self.model):  # the one place SDK errors become signals
            response = self._send(params)
        return self._parse(response, json_schema)

    def _adapted(self, signal: Fatal, sent: dict[str, Any],
                 build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The request in the form the model accepts, when `signal` is a 400 refusing one of
        our parameters and learning that changes what we send; else `signal` is re-raised."""
        fix = fix_for(signal.__cause__, sent) if signal.reason == "bad_request" else None
        if fix is None:
            raise signal
        self.quirks.learn(self.provider, self.model, fix)
        params = build()
        if params == sent:  # not a parameter we sent (or already learned): nothing to try
            raise signal
        return params

    def form(self) -> Form:
        """What the provider has said this model accepts (defaults until it says otherwise)."""
        return self.quirks.form(self.provider, self.model)

    def output_cap(self, max_tokens: int) -> int:
        """The output cap a call with this answer budget sends, thinking allowance included
        (what to count against the context window and a spending projection)."""
        return max_tokens

    def read_timeout(self, output_cap: int) -> float:
        """Seconds to wait for a reply of up to `output_cap` tokens: the configured timeout, or
        long enough for a slow model to read its prompt and write the whole cap, whichever is
        longer."""
        if not self.min_output_rate:
            return self.timeout
        return max(self.timeout, self.first_token_seconds + output_cap / self.min_output_rate)

    def streams(self, output_cap: int) -> bool:
        """Whether a call with this cap streams (long outputs do, on every provider)."""
        return output_cap > self.stream_above

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
