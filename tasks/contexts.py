"""The run contexts of this process: one per RunConfig, built on first use, closed at exit.

A task receives its RunConfig as an input (Prefect's cache key hashes it) and asks
`context_for(config)` for what that config names (core.context.RunContext). The first task of
a config builds it, under a lock of that config's own, so the sub-questions of a topic that
start together build one context, not one each, while another config's tasks go on; every
later task gets the same one. A Dask worker is a process of its own: it builds its contexts
from the configs its tasks receive.

With a Prefect server in use (PREFECT_API_URL), a context is built with what the server
holds: keys the environment lacks come from Secret blocks (tasks/secret_blocks.py), and each
provider's gate is one every process shares (tasks/shared_pacing.py), unless the config says
`shared_limits=False` or this process was told it calls alone (`alone()`: the CLI on the API
it started for itself, with its tasks in its own threads). Without a server, both stay this
process's own (core.context's defaults).

    context_for(config)   the config's context, built once
    built()               every context built so far (benches read their counters)
    flush()               every context's waiting usage records and memo answers, written
    losable()             this process may be killed mid-call (a Dask worker: flows/attempts.py)
    alone()               this process is the only one calling providers for its runs
    look_again()          every memo reads the store afresh (a lost worker's task run again)
    close()               every context closed and forgotten, the store's connections released
                          (at exit; a test's fresh start)
"""

from __future__ import annotations

import atexit
import threading
from core.context import RunContext, build
from core.settings import RunConfig
from core.store.connection import release_all
from core.store.lake import close_all
from tasks.secret_blocks import SecretBlockKeys, lake_password
from tasks.shared_pacing import api_in_use, shared_gates


class Contexts:
    """RunConfig -> RunContext for one process, each built once. Safe to share between threads."""

    def __init__(self) -> None:
        self._built: dict[RunConfig, RunContext] = {}
        self._building: dict[RunConfig, threading.Lock] = {}
        self._lock = threading.Lock()  # guards the two dicts, never held while building
        self._losable = False
        self._alone = False

    def context_for(self, config: RunConfig) -> RunContext:
        with self._lock:
            found = self._built.get(config)
            if found is not None:
                return found
            building = self._building.setdefault(config, threading.Lock())
        with building:  # a second asker of a cold config waits for the first one's context
            with self._lock:
                found = self._built.get(config)
                losable = self._losable
            if found is not None:
                return found
            made = self._build(config, losable)
            with self._lock:
                self._built[config] = made
                self._building.pop(config, None)
            return made

    def _build(self, config: RunConfig, losable: bool) -> RunContext:
        if not api_in_use():
            return build(config, losable=losable)
        lake_password(config.db_path)
        share = config.shared_limits and not self._alone
        return build(config, losable=losable, keys=SecretBlockKeys(),
                     gates=shared_gates() if share else None)

    def alone(self) -> None:
        with self._lock:
            self._alone = True

    def all(self) -> list[RunContext]:
        with self._lock:
            return list(self._built.values())

    def flush(self) -> None:
        for context in self.all():
            context.flush()

    def losable(self) -> None:
        with self._lock:
            self._losable = True
        for context in self.all():
            context.memo.write_first = True

    def look_again(self) -> None:
        for context in self.all():
            context.memo.look_again()

    def close(self) -> None:
        with self._lock:
            closing, self._built = list(self._built.values()), {}
        for context in closing:
            context.close()
        release_all()
        close_all()


_CONTEXTS = Contexts()


def context_for(config: RunConfig) -> RunContext:
    """The context of `config` in this process, built by the first task that asks."""
    return _CONTEXTS.context_for(config)


def built() -> list[RunContext]:
    return _CONTEXTS.all()


def flush() -> None:
    _CONTEXTS.flush()


def losable() -> None:
    _CONTEXTS.losable()


def alone() -> None:
    """This process is the only one calling providers for its runs: its gates stay its own."""
    _CONTEXTS.alone()


def look_again() -> None:
    _CONTEXTS.look_again()


def close() -> None:
    _CONTEXTS.close()


# Before the process ends: what waits in a batch is written, and every DuckDB file is closed
# while the interpreter is whole (a connection left to the interpreter's teardown, such as a
# corpus index's, is destroyed in no set order, beside DuckDB's own threads).
atexit.register(close)
