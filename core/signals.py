"""Provider exceptions, translated once into four typed signals.

    Signal
    ├── ContextOverflow   the request is bigger than the model (or one minute's budget) allows:
    │                     shrink the context and call again, never sleep
    ├── RateLimited       wait (retry_after when the provider said it) and retry
    ├── Transient         a passing fault: retry with backoff
    └── Fatal             configuration, auth, billing, bad request: fail now, say what to fix

`classify(exc)` maps an exception from the openai, anthropic or google-genai SDKs (or their
transport) to one of these; `translate_errors()` is the context manager each provider wraps its
SDK call in, so the original exception is always kept as `__cause__`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


class Signal(Exception):
    """Base of the typed signals. `hint` says what the user can do about it."""

    def __init__(self, message: str, *, provider: str | None = None, model: str | None = None,
                 status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.hint = hint

    def __str__(self) -> str:
        text = self.message
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class ContextOverflow(Signal):
    def __init__(self, message: str, *, limit: int | None = None, requested: int | None = None,
                 input_tokens: int | None = None, output_tokens: int | None = None,
                 limit_kind: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.limit = limit
        self.requested = requested
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.limit_kind = limit_kind


class RateLimited(Signal):
    def __init__(self, message: str, *, retry_after: float | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class Transient(Signal):
    pass


class Fatal(Signal):
    pass


def classify(exc: BaseException, model: str | None = None) -> Signal:
    """Map any SDK or transport exception to a typed signal (see module docstring)."""
    if isinstance(exc, Signal):
        return exc
    raise NotImplementedError  # filled in by the classification rules


@contextmanager
def translate_errors(model: str | None = None) -> Iterator[None]:
    """Run an SDK call; re-raise whatever it throws as a typed signal `from` the original."""
    try:
        yield
    except Signal:
        raise
    except Exception as exc:  # noqa: BLE001 - every SDK error is mapped here, once
        raise classify(exc, model=model) from exc
