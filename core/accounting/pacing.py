"""Pacing per provider, shared by every worker thread of a run.

Two rules, so that a burst of rate limits backs off the whole run instead of every worker
hammering the provider at once:

- at most `calls_per_minute` calls start in any 60 s window (RESEARCHFLOW_MAX_CALLS_PER_MINUTE;
  None: no cap), and at most `tokens_per_minute` tokens (a call's input estimate and output
  cap; RESEARCHFLOW_MAX_TOKENS_PER_MINUTE) are asked for in one;
- when the provider says "rate limited", every caller of that provider waits: for its
  retry-after when it gave one, else for a pause that doubles with each consecutive rate limit
  (1 s, 2 s, 4 s ... up to 60 s) and resets after a success. A retry-after longer than
  `max_pause` is not waited on here (the task fails with that number instead).

It only waits; retries are Prefect's (tasks.retry). A run's context holds one gate per provider
it calls (core.context), each with the run's own per-minute cap.

`ProviderGate` is this process's gate. Whoever builds a run's context may hand it another
`Gate` maker (a `GateMaker`): tasks/shared_pacing.py keeps the cap and the pauses on a Prefect
server, for every process and machine that talks to it; core never knows which.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Protocol

MAX_PAUSE = 300.0  # seconds; the same bound as the retry rules
_FIRST_PAUSE = 1.0
_LONGEST_BLIND_PAUSE = 60.0


class Gate(Protocol):
    """What a billed call waits at (core.accounting.metering.Meter): one per provider."""

    calls_per_minute: int | None
    waited: float

    def wait(self, tokens: int = 0) -> float:
        """Block until a call asking for `tokens` may start; the seconds waited."""
        ...

    def rate_limited(self, retry_after: float | None) -> float:
        """Pause every caller of the provider; the pause applied (0: none)."""
        ...

    def succeeded(self) -> None: ...


# provider, calls per minute, tokens per minute -> that provider's gate
GateMaker = Callable[[str, "int | None", "int | None"], Gate]


class ProviderGate:
    """This process's gate of one provider, shared by its threads."""

    def __init__(self, calls_per_minute: int | None = None, *, max_pause: float = MAX_PAUSE,
                 tokens_per_minute: int | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.calls_per_minute = calls_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.max_pause = max_pause
        self._clock = clock
        self._sleep = sleep
        self._starts: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()  # (start, tokens) in the last minute
        self._paused_until = 0.0
        self._blind_pause = _FIRST_PAUSE
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds spent waiting, for logs and benchmarks

    def wait(self, tokens: int = 0) -> float:
        """Block until a call asking for `tokens` may start; returns the seconds waited. A call
        asking for more than a minute's tokens goes alone, when the last minute asked for none."""
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                delay = max(0.0, self._paused_until - now)
                if not delay and self.calls_per_minute:
                    while self._starts and now - self._starts[0] >= 60.0:
                        self._starts.popleft()
                    if len(self._starts) >= self.calls_per_minute:
                        delay = 60.0 - (now - self._starts[0])
                if not delay and self.tokens_per_minute and tokens:
                    while self._tokens and now - self._tokens[0][0] >= 60.0:
                        self._tokens.popleft()
                    asked = sum(n for _, n in self._tokens)
                    if self._tokens and asked + tokens > self.tokens_per_minute:
                        delay = 60.0 - (now - self._tokens[0][0])
                if delay <= 0:
                    self._starts.append(now)
                    if self.tokens_per_minute and tokens:
                        self._tokens.append((now, tokens))
                    self.waited += waited
                    return waited
            self._sleep(delay)
            waited += delay

    def rate_limited(self, retry_after: float | None) -> float:
        """Pause every caller after a rate limit; returns the pause applied (0 if none)."""
        with self._lock:
            if retry_after is None:
                pause = self._blind_pause
                self._blind_pause = min(self._blind_pause * 2, _LONGEST_BLIND_PAUSE)
            else:
                pause = float(retry_after)
            if pause > self.max_pause:
                return 0.0
            self._paused_until = max(self._paused_until, self._clock() + pause)
            return pause

    def succeeded(self) -> None:
        with self._lock:
            self._blind_pause = _FIRST_PAUSE
