"""The call memo: every successful billed call is paid once (ARCHITECTURE.md, "Caching and
reruns").

A step task can make several provider calls (a page condensed in pieces, a JSON answer asked
again, a shrink loop); when a later one fails, the task's cache has nothing for the earlier
ones. So below the tasks, `core.accounting.metering` asks this memo before every billed call: an
answer recorded under the same fingerprint is served (the ledger writes an 'served' row at $0), and
every successful answer is recorded. That holds in a run, in Prefect's retry of the same flow run,
and in a rerun by the CLI, whatever task the call sits in.

The fingerprint is a sha256 over what decides the answer: provider, model, base URL, the
messages, parameters (output cap, temperature, reasoning effort, thinking budget), the schema,
and two things that are not the request: for a search, the edition (a search observes the
world, so a scheduled topic's new edition asks again while a retry or rerun of the same edition
is served), and the refresh salt (a `--refresh` run's root run id: it asks everything again,
and its own retry is served what it asked). Never the key. An LLM call only thinks about what
it is shown, so its fingerprint has no edition: a new edition that sends a byte-identical
request (an unchanged page condensed for an unchanged sub-question, an unchanged transcript
compressed) is served the answer (issue 22, part 2). The store keeps the fingerprint and the
answer, never the request.

Records are kept in memory at once (so the same process is served at once) and written to the
store (`core.store.call_memo`) in batches by the ledger's writer (core.accounting.batches); a
record the store could not take is tried again with a growing pause. `ttl_hours` bounds how
old a served answer may be; 0 turns the memo off. An LLM answer is served for at least as long as the thinking steps' task caches keep
theirs (8 days, `tasks.caching.LASTING_EXPIRATION`), so next night's or next week's edition
finds it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, Sequence

from core.accounting.batches import BatchWriter, Patience
from core.accounting.ledger import current_scope
from core.llm.base import Completion, Usage
from core.models import SearchResult
from core.secrets import mask

_VERSION = 1  # bump when the answer's encoding changes: older records are then never served
# Kinds of call that observe the world: their fingerprint carries the edition.
OBSERVING = frozenset({"search"})
# How long an LLM answer is served at least: as long as the thinking steps' task caches
# (tasks.caching.LASTING_EXPIRATION; core does not import tasks).
LASTING = timedelta(days=8)
REFRESH_SECONDS = 5.0  # on a miss, the store's new fingerprints are read at most this often
_LOOK_BACK = timedelta(minutes=10)  # how late a record may reach the store after created_at
_PRUNE_EVERY = timedelta(minutes=10)  # answers past their expiry leave memory this often
# An answer is a saving, not a record of spend: past the bound the oldest are dropped (counted
# in an error) rather than hold up research; an answer can be ~10 kB, so fewer wait than usage rows.
MEMO_PATIENCE = Patience(max_waiting=10_000, when_full="drop_oldest")


class MemoSink(Protocol):
    """Where records live (core.store.call_memo.MemoStore)."""

    def fingerprints(self, since: datetime) -> set[str] | None: ...

    def answers(self, fingerprints: Sequence[str], since: datetime) -> dict[str, str] | None: ...

    def keep(self, rows: Sequence["MemoRow"]) -> bool: ...


def _now() -> datetime:
    return datetime.now(timezone.utc)


def fingerprint(kind: str, request: dict[str, Any], *, edition: str, salt: str = "") -> str:
    """The hash of one request (no key in it), its edition and refresh salt."""
    payload = json.dumps({"v": _VERSION, "kind": kind, "request": request, "edition": edition,
                          "salt": salt}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MemoRow:
    """One recorded answer, as the store keeps it (core.store.call_memo)."""

    fingerprint: str
    kind: str  # "llm" | "search"
    provider: str
    model: str
    role: str | None
    answer: str  # JSON (the codecs below)
    created_at: datetime


@dataclass(frozen=True)
class MemoKey:
    key: str
    plain: str | None = None  # a refreshing run's unsalted twin, also written on success
    kind: str = "llm"


class CallMemo:
    """Answers of billed calls by fingerprint, shared by every worker of a store."""

    def __init__(self, sink: MemoSink | None, *, ttl_hours: float, salt: str = "",
                 batch_seconds: float = 0.5, refresh_seconds: float = REFRESH_SECONDS,
                 patience: Patience = MEMO_PATIENCE) -> None:
        self.sink = sink
        self.ttl = timedelta(hours=max(0.0, ttl_hours))
        self.salt = salt
        self.refresh_seconds = refresh_seconds
        self._known: dict[str, tuple[datetime, str]] = {}
        self._stored: set[str] | None = None  # fingerprints in the store when last looked
        self._looked: datetime | None = None  # when the store was last looked at
        self._pruned = _now()
        self._rows: BatchWriter[MemoRow] = BatchWriter(
            sink.keep if sink is not None else _kept_in_memory, what="memo answer",
            batch_seconds=batch_seconds, patience=patience)
        self._lock = threading.Lock()
        # In a process that may be lost mid-run (a Dask worker), each answer is written as it
        # is kept, and what a refused write left waits is written before each new call
        # (`write_waiting`): a store write per call, paid only there.
        self.write_first = False
        self.served = 0  # counters for benches and tests
        self.kept = 0

    @property
    def enabled(self) -> bool:
        return self.ttl > timedelta(0)

    def key(self, kind: str, request: dict[str, Any]) -> MemoKey:
        """The fingerprint of a request: a search's in the current scope's edition, an LLM
        call's in any edition."""
        edition = current_scope().edition if kind in OBSERVING else ""
        return MemoKey(fingerprint(kind, request, edition=edition, salt=self.salt),
                       fingerprint(kind, request, edition=edition) if self.salt else None, kind)

    def window(self, kind: str) -> timedelta:
        """How old an answer of this kind may be when it is served."""
        return self.ttl if kind in OBSERVING else max(self.ttl, LASTING)

    def answer(self, memo_key: MemoKey) -> str | None:
        """The recorded answer (JSON) under the key while fresh, else None."""
        if not self.enabled:
            return None
        key = memo_key.key
        since = _now() - self.window(memo_key.kind)
        with self._lock:
            found = self._known.get(key)
        if found is not None and found[0] >= since:
            return found[1]
        if self.sink is None or not self._maybe_stored(key):
            return None
        stored = (self.sink.answers([key], since) or {}).get(key)
        if stored is not None:
            with self._lock:
                self._known[key] = (_now(), stored)
        return stored

    def _maybe_stored(self, key: str) -> bool:
        """Whether the store may hold `key`. The store's fingerprints are read once, so a
        first call (most calls of a run) costs no read of the store (~3-6 ms each on a DuckDB
        file); on a miss, once `refresh_seconds` have passed, what was recorded since the
        last look (another worker's calls) is read and added. A long-lived worker (Dask, a
        served deployment) is thus served a rerun's calls that another worker made after it
        first looked; only two workers asking the same within seconds both pay (a task run
        again after its worker was lost makes its new worker look again: `look_again`).
        Unreadable: every key may be there, and is asked."""
        now = _now()
        since = now - self._longest()  # answers() checks each key's own window
        with self._lock:
            known, looked = self._stored, self._looked
        if known is not None and key in known:
            return True
        if known is not None and looked is not None \
                and now - looked < timedelta(seconds=self.refresh_seconds):
            return False
        # Records are written up to a batch (or a locked store's pause) after their
        # created_at: read back a margin before the last look.
        start = since if known is None else max(since, looked - _LOOK_BACK)  # type: ignore
        found = self.sink.fingerprints(start)  # type: ignore[union-attr]
        if found is None:
            return True
        with self._lock:
            self._stored = found if self._stored is None else self._stored | found
            self._looked = now
        return key in found

    def _longest(self) -> timedelta:
        return max(self.window(k) for k in ("llm", *OBSERVING))

    def keep(self, memo_key: MemoKey, answer: str, *, kind: str, provider: str, model: str,
             role: str | None) -> None:
        """Record a successful call's answer, under `key` and, for a refreshing run, also
        under its unsalted key: the next ordinary run is served the newest answer."""
        if not self.enabled:
            return
        now = _now()
        with self._lock:
            if now - self._pruned > _PRUNE_EVERY:  # a long-lived worker keeps only fresh answers
                self._known = {k: v for k, v in self._known.items()
                               if v[0] >= now - self._longest()}
                self._pruned = now
            keys = [k for k in (memo_key.key, memo_key.plain) if k]
            for k in keys:
                self._known[k] = (now, answer)
            self.kept += 1
        self._rows.add(MemoRow(k, kind, provider, model, role, answer, now) for k in keys)
        if self.write_first:
            # A process that may be lost (a Dask worker) writes the answer before the call
            # returns: a task whose last call this was may be killed before it reports back,
            # and its rerun is then served the answer, not billed for it again.
            self._rows.flush()
        self._rows.settle()

    def flush(self) -> None:
        """Write waiting records; what the store could not take is tried again later."""
        self._rows.flush()

    def close(self) -> None:
        """The last writes of what waits (the run's end), tried for a while; an answer after it
        is written at once."""
        self._rows.close()

    def write_waiting(self) -> None:
        """Before a new billed call leaves (with `write_first` set): write the answers still
        waiting in the batch, so a process killed while that call is in flight (a lost Dask
        worker) has lost no answer it was paid for; the next attempt, wherever it runs, is
        served them."""
        if self.write_first and self._rows.waiting():
            self.flush()

    def look_again(self) -> None:
        """Forget what the store was seen to hold: the next miss reads it afresh. For a task run
        again after its worker was lost: what that worker recorded just before it died is newer
        than this process's last look, and is to be served, not paid for again."""
        with self._lock:
            self._stored, self._looked = None, None

    def note_served(self) -> None:
        with self._lock:
            self.served += 1


def _kept_in_memory(rows: Sequence[MemoRow]) -> None:
    """A memo without a store (tests, benches) serves from memory only."""


# -- what an answer is, as JSON ----------------------------------------------------------------

def completion_answer(completion: Completion) -> str:
    u = completion.usage
    return json.dumps({"text": mask(completion.text), "model": completion.model,
                       "finish_reason": completion.finish_reason,
                       "usage": [u.input_tokens, u.output_tokens, u.cached_input_tokens,
                                 u.reasoning_tokens]}, ensure_ascii=False)


def completion_from(answer: str) -> Completion | None:
    try:
        data = json.loads(answer)
        usage = Usage(*data["usage"])
        return Completion(text=str(data["text"]), model=str(data["model"]), usage=usage,
                          finish_reason=data.get("finish_reason"))
    except (ValueError, KeyError, TypeError):  # not what this code wrote: a miss
        return None


def results_answer(results: Sequence[SearchResult]) -> str:
    return json.dumps([{**r.model_dump(), "snippet": mask(r.snippet)} for r in results],
                      ensure_ascii=False)


def results_from(answer: str) -> list[SearchResult] | None:
    try:
        return [SearchResult(**item) for item in json.loads(answer)]
    except (ValueError, TypeError):
        return None
