"""Billed services behind the ledger: every call waits its turn, fits the budget, is recorded.

`MeteredModel` wraps any `ChatModel` (and `core.search.metered.MeteredSearch` any billed
`SearchBackend`, SerpAPI or SearXNG, with the same `Meter`). Before
a call: the budget check (spent + projected cost of input estimate and output cap, see
`core.accounting.ledger`), then the provider's gate (`core.accounting.pacing`). After it: one
`CallRecord`, whether the call succeeded or raised a signal, with the provider's own token counts
(estimated, and marked so, only when the provider reported none). A rate limit pauses the whole
provider's gate.

Before all of that, the call memo (core.accounting.memo): a request already answered (a search: in
this edition; an LLM call: in any) is served its recorded answer, with a ledger row of outcome
'served' at $0 and no budget, gate or provider involved; every successful answer is recorded for the
next repeat (on a Dask worker, what waits in the memo's batch is written before a new call leaves: a
worker killed mid-call has lost no answer it paid for).

What it does not do: retry (Prefect does), shrink (core.overflow.recovery does), or swallow
anything: every signal is re-raised untouched after it is recorded.
"""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from core.accounting.ledger import Ledger, current_role, current_scope
from core.accounting.memo import CallMemo, completion_answer, completion_from
from core.accounting.pacing import Gate, GateMaker, ProviderGate
from core.accounting.prices import PriceTable
from core.accounting.usage import CallRecord, CallRole
from core.llm.base import ChatModel, Completion
from core.models import Message
from core.overflow.tokens import TokenEstimator
from core.signals import RateLimited, Signal, mask_secrets

_ERROR_CHARS = 300


@dataclass
class Meter:
    """What every billed wrapper shares (MeteredModel here, core.search.metered.MeteredSearch):
    ledger, prices, gate, and how a record is made."""

    ledger: Ledger
    prices: PriceTable
    gate: Gate

    @contextmanager
    def held(self, model: str, what: str, *, input_tokens: int = 0,
             output_cap: int = 0) -> Iterator[None]:
        """Check the budgets and hold the call's projected cost while it is in flight (so
        workers starting at once cannot all pass a check only one fits), then wait its turn."""
        projected = self.prices.cost(model, input_tokens=input_tokens, output_tokens=output_cap)
        reservation = self.ledger.reserve(current_scope(), projected, what)
        try:
            self.gate.wait(input_tokens + output_cap)  # what a tokens-per-minute limit counts
            yield
        finally:
            self.ledger.release(reservation)  # after the call's record: spent takes it over

    def after_failure(self, exc: Signal, *, provider: str, model: str, role: CallRole,
                      started: float) -> None:
        if isinstance(exc, RateLimited):
            self.gate.rate_limited(exc.retry_after)
        self._record(provider, model, role, started, outcome=type(exc).__name__,
                     cost_usd=0.0, error=mask_secrets(str(exc))[:_ERROR_CHARS])

    def after_success(self, *, provider: str, model: str, role: CallRole, started: float,
                      **usage: Any) -> None:
        self.gate.succeeded()
        cost = self.prices.cost(model, input_tokens=usage.get("input_tokens"),
                                cached_input_tokens=usage.get("cached_input_tokens"),
                                output_tokens=usage.get("output_tokens"))
        self._record(provider, model, role, started, outcome="ok", cost_usd=cost, **usage)

    def served(self, *, provider: str, model: str, role: CallRole) -> None:
        """A repeat answered from the call memo: recorded as served, at no cost."""
        self._record(provider, model, role, time.monotonic(), outcome="served", cost_usd=0.0)

    def _record(self, provider: str, model: str, role: CallRole, started: float,
                **fields: Any) -> None:
        scope = current_scope()
        self.ledger.record(CallRecord(
            call_id=uuid.uuid4().hex, run_id=scope.run_id, batch_id=scope.batch_id,
            topic_id=scope.topic_id, subquestion_index=scope.subquestion_index, role=role,
            provider=provider, model=model,
            latency_ms=round((time.monotonic() - started) * 1000, 1), **fields))


class MeteredModel:
    """A `ChatModel` that paces, budgets and records each call of the model it wraps."""

    def __init__(self, inner: ChatModel, ledger: Ledger, prices: PriceTable, gate: Gate,
                 estimator: TokenEstimator | None = None, memo: CallMemo | None = None) -> None:
        self.inner = inner
        self.meter = Meter(ledger, prices, gate)
        self.estimator = estimator if estimator is not None else TokenEstimator()
        self.memo = memo if memo is not None and memo.enabled else None

    # The wrapped model's identity, so callers see the real provider and model.
    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def key_env_var(self) -> str | None:
        return self.inner.key_env_var

    def __getattr__(self, name: str) -> Any:  # capabilities (supports_schema, ...) pass through
        return getattr(self.inner, name)

    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 json_schema: dict[str, Any] | None = None,
                 temperature: float = 0.0) -> Completion:
        role = current_role()
        key = None
        if self.memo is not None:
            key = self.memo.key("llm", self._request(messages, max_tokens, json_schema,
                                                     temperature))
            found = self.memo.answer(key)
            served = completion_from(found) if found is not None else None
            if served is not None:
                self.meter.served(provider=self.provider, model=self.model, role=role)
                self.memo.note_served()
                return served
            self.memo.write_waiting()
        completion = self._complete(messages, max_tokens, json_schema, temperature, role)
        if key is not None:
            self.memo.keep(key, completion_answer(completion), kind="llm",  # type: ignore
                           provider=self.provider, model=self.model, role=role)
        return completion

    def serve_repeat(self) -> None:
        """A repeat answered above this model, from what it answered to the same input (an
        engine's revision record, core.engine.model_driven.revisions): a `served` row at $0,
        as the memo's own repeats have."""
        self.meter.served(provider=self.provider, model=self.model, role=current_role())
        if self.memo is not None:
            self.memo.note_served()

    def _request(self, messages: Sequence[Message], max_tokens: int,
                 json_schema: dict[str, Any] | None, temperature: float) -> dict[str, Any]:
        """What decides the answer, for the memo's fingerprint: never the key."""
        inner = self.inner
        return {"provider": self.provider, "model": self.model,
                "base_url": getattr(inner, "base_url", None),
                "messages": [m.model_dump(mode="json") if hasattr(m, "model_dump") else m
                             for m in messages],
                "max_tokens": max_tokens, "temperature": temperature, "schema": json_schema,
                "reasoning_effort": getattr(inner, "reasoning_effort", None),
                "thinking_budget": getattr(inner, "thinking_budget", None)}

    def _complete(self, messages: Sequence[Message], max_tokens: int,
                  json_schema: dict[str, Any] | None, temperature: float,
                  role: CallRole) -> Completion:
        estimate = self.estimator.estimate(messages, model=self.model)
        if json_schema:
            estimate += self.estimator.estimate(str(json_schema), model=self.model)
        sent_cap = self.inner.output_cap(max_tokens) if hasattr(self.inner, "output_cap") \
            else max_tokens  # thinking allowance included: it is billed as output
        with self.meter.held(self.model, role, input_tokens=estimate, output_cap=sent_cap):
            started = time.monotonic()
            try:
                completion = self.inner.complete(messages, max_tokens=max_tokens,
                                                 json_schema=json_schema, temperature=temperature)
            except Signal as exc:
                self.meter.after_failure(exc, provider=self.provider, model=self.model,
                                         role=role, started=started)
                raise
            usage = completion.usage
            self.meter.after_success(
                provider=self.provider, model=self.model, role=role, started=started,
                input_tokens=usage.input_tokens if usage.reported else estimate,
                cached_input_tokens=usage.cached_input_tokens,
                output_tokens=(usage.output_tokens if usage.reported
                               else self.estimator.estimate(completion.text, model=self.model)),
                reasoning_tokens=usage.reasoning_tokens, tokens_estimated=not usage.reported)
        return completion


class Billing:
    """What meters one run's billed calls: its ledger, prices, call memo and token estimates,
    and a gate per provider at the run's per-minute caps, made by `gates` (default: this
    process's own, core.accounting.pacing.ProviderGate). `model(m)` puts a chat model behind
    them (a search goes behind them in core.search.metered). Safe to share between threads."""

    def __init__(self, ledger: Ledger, prices: PriceTable, memo: CallMemo | None,
                 estimator: TokenEstimator, *, calls_per_minute: int | None = None,
                 tokens_per_minute: int | None = None, gates: GateMaker | None = None) -> None:
        self.ledger = ledger
        self.prices = prices
        self.memo = memo
        self.estimator = estimator
        self.calls_per_minute = calls_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.gates: dict[str, Gate] = {}
        self._make_gate: GateMaker = gates or _process_gate
        self._lock = threading.Lock()

    def gate(self, provider: str) -> Gate:
        """The provider's gate: every model and search of the run calling it waits at one."""
        with self._lock:
            if provider not in self.gates:
                self.gates[provider] = self._make_gate(provider, self.calls_per_minute,
                                                       self.tokens_per_minute)
            return self.gates[provider]

    def model(self, model: ChatModel) -> MeteredModel:
        return MeteredModel(model, self.ledger, self.prices, self.gate(model.provider),
                            estimator=self.estimator, memo=self.memo)


def _process_gate(provider: str, calls_per_minute: int | None,
                  tokens_per_minute: int | None) -> Gate:
    return ProviderGate(calls_per_minute, tokens_per_minute=tokens_per_minute)
