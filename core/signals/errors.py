"""Exceptions that survive pickling with their fields.

Pickle rebuilds an exception as `cls(*args)`: one whose constructor takes keyword-only fields
(a signal's provider, a budget's scope) or more than its message (a refused page's url and
reason) comes back as a TypeError, or without its fields. Results that Prefect persists and
failures that come back from a worker process (Dask) are pickled, so our exceptions rebuild
from their attributes instead.
"""

from __future__ import annotations

from typing import Any


class PicklableError(Exception):
    """Base of exceptions with fields of their own: unpickled with args and attributes."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), self.args, dict(vars(self)))


def _rebuilt(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
             ) -> BaseException:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc
