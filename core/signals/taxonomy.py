"""The typed signals every provider failure becomes (see the package map in `core.signals`).

Each keeps the fields a caller acts on (a window's numbers, a retry-after, a reason) and
pickles with them (`core.signals.errors.PicklableError`): Prefect persists failures and Dask sends
them between processes.
"""

from __future__ import annotations

from core.signals.errors import PicklableError
from core.secrets import mask


class Signal(PicklableError):
    """Base of the typed signals. `hint` says what the user can do about it. Message and hint
    are masked (core.secrets) when the signal is made: a key a provider echoed never travels."""

    def __init__(self, message: str, *, provider: str | None = None, model: str | None = None,
                 status: int | None = None, hint: str | None = None) -> None:
        message = mask(message)
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.hint = mask(hint) if hint else hint

    def __str__(self) -> str:
        text = self.message
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class ContextOverflow(Signal):
    """`limit_kind`: context_window | context_window_incl_output | input_window |
    tpm_per_request (one request above the per-minute token budget) | message_chars |
    request_bytes. `requested` includes the output tokens when the provider counted them.

    `side` says what to cut: "output" when the prompt alone fits and only the requested output
    does not (lower max_tokens), "input" when the prompt itself is too long, None when unknown.
    The classifier always decides it (`infer_side=False`: None then means the message cannot
    tell, e.g. a prompt count the server cut off at the limit); a signal built elsewhere without
    a side infers it from the numbers.
    """

    def __init__(self, message: str, *, limit: int | None = None, requested: int | None = None,
                 input_tokens: int | None = None, output_tokens: int | None = None,
                 limit_kind: str | None = None, side: str | None = None,
                 infer_side: bool = True, **kw) -> None:
        super().__init__(message, **kw)
        self.limit = limit
        self.requested = requested
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.limit_kind = limit_kind
        self._side = side
        self._infer_side = infer_side

    @property
    def side(self) -> str | None:
        if self._side is not None or not self._infer_side:
            return self._side
        if self.limit and self.input_tokens is not None:
            return "input" if self.input_tokens >= self.limit else "output"
        if self.limit and self.requested and self.limit_kind in ("context_window",
                                                                  "input_window"):
            return "input"  # requested counts the prompt alone, and it is over
        return None


class RateLimited(Signal):
    """`reason`: rate_limit | overloaded | quota. `tokens_per_minute` is the budget when stated."""

    def __init__(self, message: str, *, retry_after: float | None = None,
                 reason: str | None = None, tokens_per_minute: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after
        self.reason = reason
        self.tokens_per_minute = tokens_per_minute


class Transient(Signal):
    pass


class Fatal(Signal):
    """`reason`: auth | permission | not_found | billing | quota | output_cap | bad_request |
    config | internal. For output caps `limit_kind` is "output_tokens" and `max_output` the cap."""

    def __init__(self, message: str, *, reason: str | None = None, limit_kind: str | None = None,
                 max_output: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.reason = reason
        self.limit_kind = limit_kind
        self.max_output = max_output


class BudgetExceeded(Signal):
    """`scope` is "topic" or "batch"; amounts in USD: spent so far, the cap, the next call's
    projection (input estimate + output cap)."""

    def __init__(self, message: str, *, scope: str, spent: float, limit: float,
                 projected: float, **kw) -> None:
        super().__init__(message, **kw)
        self.scope = scope
        self.spent = spent
        self.limit = limit
        self.projected = projected
