"""Provider limits held by a Prefect server: one cap and one pause for every process that uses it.

core.accounting.pacing's `ProviderGate` paces the threads of one process. Two Dask workers, or
two `prefect worker` processes on one pool, would each start RESEARCHFLOW_MAX_CALLS_PER_MINUTE
calls a minute, and a 429's retry-after would stop only the process that saw it. So when a
Prefect server is in use, a run's context gets `SharedGate`s instead (same interface,
core.accounting.pacing.Gate), which keep both on the server, for every process and machine:

    researchflow-<provider>-calls   a global concurrency limit used as a rate limit: 1 slot that
                                    decays at N/60 a second, so calls start 60/N s apart, at
                                    most N in any minute (a bucket of N slots would let 2N
                                    through in a cold minute: N at once, N more as they decay)
    researchflow-<provider>-tokens  T slots decaying at T/60 a second; a call occupies its input
                                    estimate and output cap (at most T)
    researchflow-<provider>-paused-until
                                    a Variable: the wall-clock second (Unix time) before which
                                    no process calls the provider, set after a rate limit;
                                    read before every call

A limit is created on first use from the run's settings, or beforehand by `researchflow limits`
(flows/cli.py); one that exists is used as it is, so a limit made or changed in the UI's
Concurrency page wins over a worker's settings, and a limit made there for a provider with no
setting at all paces it too. The pause is read from the server before every call (one small
request: a call that would have been refused is worth it), and this process's own threads also
wait at an in-process pause, so they do not each ask. A server that cannot be reached does not
fail a call: the gate paces in this process for that call and says so once.

Clocks: the pause is wall-clock time, so machines are assumed to keep theirs in step (NTP); a
pause further ahead than `max_pause` (a skewed clock) is not waited on.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from core.accounting.pacing import MAX_PAUSE, Gate, GateMaker, ProviderGate

log = logging.getLogger("researchflow.pacing")

PREFIX = "researchflow"


@dataclass(frozen=True)
class LimitNames:
    """What a provider's limits and pause are called on the server."""

    provider: str

    @property
    def calls(self) -> str:
        return f"{PREFIX}-{self.provider}-calls"

    @property
    def tokens(self) -> str:
        return f"{PREFIX}-{self.provider}-tokens"

    @property
    def pause(self) -> str:
        return f"{PREFIX}-{self.provider}-paused-until"


def calls_limit(calls_per_minute: int) -> tuple[int, float]:
    """(slots, decay per second) of a calls-per-minute cap: one slot, freed in 60/N s."""
    return 1, calls_per_minute / 60.0


def tokens_limit(tokens_per_minute: int) -> tuple[int, float]:
    """(slots, decay per second) of a tokens-per-minute cap: a minute's tokens, freed in 60 s."""
    return tokens_per_minute, tokens_per_minute / 60.0


def ensure_limit(name: str, slots: int, decay: float, *, update: bool = False) -> str:
    """Create the rate limit `name` on the server unless it exists (`update`: set it to these
    figures if it does). Returns what was done: "created", "updated", "kept", or "differs"
    (kept, with other figures)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import (GlobalConcurrencyLimitCreate,
                                                GlobalConcurrencyLimitUpdate)
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            found = client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(
                    name=name, limit=slots, slot_decay_per_second=decay, active=True))
                return "created"
            except ObjectAlreadyExists:  # another worker made it first: theirs stands
                return "kept"
        if found.limit == slots and found.slot_decay_per_second == decay:
            return "kept"
        if not update:
            return "differs"
        client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(
            limit=slots, slot_decay_per_second=decay))
        return "updated"


def _existing_rate_limit(name: str) -> int | None:
    """The slots of the active rate limit `name` on the server, None when there is none (or it
    has no slot decay, which Prefect refuses to rate-limit with: said once)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            found = client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            return None
    if not found.active:
        return None
    if not found.slot_decay_per_second:
        log.warning("the Prefect concurrency limit %s has no slot decay, so it cannot pace "
                    "calls; give it a decay (slots per second) to use it", name)
        return None
    return int(found.limit)


class SharedGate:
    """One provider's gate on the Prefect server (see the module's docstring). Thread-safe."""

    def __init__(self, provider: str, calls_per_minute: int | None = None,
                 tokens_per_minute: int | None = None, *, max_pause: float = MAX_PAUSE,
                 sleep: Callable[[float], None] = time.sleep,
                 wall: Callable[[], float] = time.time) -> None:
        self.provider = provider
        self.calls_per_minute = calls_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.max_pause = max_pause
        self.names = LimitNames(provider)
        self.local = ProviderGate(max_pause=max_pause, sleep=sleep)  # this process's pause
        self.waited = 0.0
        self._sleep = sleep
        self._wall = wall
        self._lock = threading.Lock()
        # One thread of the process asks the server for a slot at a time, the others queue
        # here: each denied ask lengthens the server's Retry-After for every asker (Prefect
        # counts denied slots), so four threads polling got 45 calls a minute of a cap of 60.
        self._asking = threading.Lock()
        self._limits: tuple[list[str], int | None] | None = None  # calls names, tokens slots
        self._offline: ProviderGate | None = None  # paces in-process while the server is away
        self._client: Any = None  # a Prefect SyncPrefectClient, opened on first use
        self._said_offline = False

    # -- the gate -------------------------------------------------------------------------------

    def wait(self, tokens: int = 0) -> float:
        started = time.monotonic()
        self.local.wait()
        try:
            self._wait_on_server(tokens)
        except Exception as exc:  # noqa: BLE001 - the server's trouble never fails a call
            self._pace_offline(exc).wait(tokens)
        waited = time.monotonic() - started
        with self._lock:
            self.waited += waited
        return waited

    def rate_limited(self, retry_after: float | None) -> float:
        pause = self.local.rate_limited(retry_after)
        if pause:
            try:
                self._publish_pause(self._wall() + pause)
            except Exception as exc:  # noqa: BLE001 - this process still pauses
                self._pace_offline(exc)
        return pause

    def succeeded(self) -> None:
        self.local.succeeded()

    # -- on the server --------------------------------------------------------------------------

    def _wait_on_server(self, tokens: int) -> None:
        from prefect.concurrency.sync import rate_limit

        self._sit_out_pause()
        calls, token_slots = self._known_limits()
        with self._asking:
            if calls:
                rate_limit(calls, occupy=1)
            if token_slots and tokens:
                rate_limit(self.names.tokens, occupy=max(1, min(int(tokens), token_slots)))
        if calls or (token_slots and tokens):
            self._sit_out_pause()  # a pause that began while this call waited for its slot

    def _known_limits(self) -> tuple[list[str], int | None]:
        """The limits this provider's calls take slots of, made on first use from the run's
        caps (or the server's own, when it has them)."""
        with self._lock:
            if self._limits is not None:
                return self._limits
        wanted = ((self.names.calls, self.calls_per_minute, calls_limit),
                  (self.names.tokens, self.tokens_per_minute, tokens_limit))
        for name, per_minute, shape in wanted:
            done = ensure_limit(name, *shape(per_minute)) if per_minute else "kept"
            if done == "created":
                log.info("created the Prefect concurrency limit %s", name)
            elif done == "differs":
                log.warning("the Prefect concurrency limit %s is not this worker's %d a minute; "
                            "the server's is used (`researchflow limits %s` changes it for "
                            "every worker)", name, per_minute, self.provider)
        calls = [self.names.calls] if _existing_rate_limit(self.names.calls) else []
        limits = (calls, _existing_rate_limit(self.names.tokens))
        with self._lock:
            self._limits = limits
        return limits

    def _sit_out_pause(self) -> None:
        """Sleep until the provider's shared pause (if any) is over."""
        while True:
            delay = self._paused_until() - self._wall()
            if delay <= 0 or delay > self.max_pause:
                return
            self._sleep(delay)

    def _server(self) -> Any:
        """This gate's client of the server, opened once: a client per read cost ~35 ms of a
        busy machine's time, a kept one ~3 ms."""
        with self._lock:
            if self._client is None:
                from prefect.client.orchestration import get_client

                client = get_client(sync_client=True)
                client.__enter__()
                self._client = client
            return self._client

    def _paused_until(self) -> float:
        found = self._server().read_variable_by_name(self.names.pause)
        try:
            return float(found.value) if found is not None else 0.0
        except (TypeError, ValueError):
            return 0.0

    def _publish_pause(self, until: float) -> None:
        from prefect.client.schemas.actions import VariableCreate, VariableUpdate

        client = self._server()
        found = client.read_variable_by_name(self.names.pause)
        if found is None:
            client.create_variable(VariableCreate(name=self.names.pause, value=until,
                                                  tags=[PREFIX]))
            return
        try:
            until = max(until, float(found.value))  # a shorter pause never shortens one
        except (TypeError, ValueError):
            pass
        client.update_variable(VariableUpdate(name=self.names.pause, value=until))

    def _pace_offline(self, exc: Exception) -> ProviderGate:
        with self._lock:
            if self._offline is None:
                self._offline = ProviderGate(self.calls_per_minute, max_pause=self.max_pause,
                                             tokens_per_minute=self.tokens_per_minute,
                                             sleep=self._sleep)
            said, self._said_offline = self._said_offline, True
        if not said:
            log.warning("the Prefect server's limits for %s could not be used (%s: %s); pacing "
                        "in this process until it answers", self.provider, type(exc).__name__,
                        exc)
        return self._offline


def shared_gates(*, max_pause: float = MAX_PAUSE) -> GateMaker:
    """A maker of SharedGates, for core.context.build."""
    def make(provider: str, calls_per_minute: int | None,
             tokens_per_minute: int | None) -> Gate:
        return SharedGate(provider, calls_per_minute, tokens_per_minute, max_pause=max_pause)
    return make


def api_in_use() -> bool:
    """Whether this process talks to a Prefect API server (PREFECT_API_URL, in the environment
    or Prefect's settings): without one there is nothing to share limits through."""
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())
