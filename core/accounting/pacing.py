"""Pacing per provider, shared by every worker thread of a run.

Two rules, so that a burst of rate limits backs off the whole run instead of every worker
hammering the provider at once:

- at most `calls_per_minute` calls start in any 60 s window (RESEARCHFLOW_MAX_CALLS_PER_MINUTE;
  None: no cap);
- when the provider says "rate limited", every caller of that provider waits: for its
  retry-after when it gave one, else for a pause that doubles with each consecutive rate limit
  (1 s, 2 s, 4 s ... up to 60 s) and resets after a success. A retry-after longer than
  `max_pause` is not waited on here (the task fails with that number instead).

It only waits; retries are Prefect's (tasks.retry). A run's context holds one gate per provider
it calls (core.context), each with the run's own per-minute cap.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

MAX_PAUSE = 300.0  # seconds; the same bound as the retry rules
_FIRST_PAUSE = 1.0
_LONGEST_BLIND_PAUSE = 60.0


class ProviderGate:
    def __init__(self, calls_per_minute: int | None = None, *, max_pause: float = MAX_PAUSE,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.calls_per_minute = calls_per_minute
        self.max_pause = max_pause
        self._clock = clock
        self._sleep = sleep
        self._starts: deque[float] = deque()
        self._paused_until = 0.0
        self._blind_pause = _FIRST_PAUSE
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds spent waiting, for logs and benchmarks

    def wait(self) -> float:
        """Block until a call may start; returns the seconds waited."""
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
                if delay <= 0:
                    self._starts.append(now)
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
