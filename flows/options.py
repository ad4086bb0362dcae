"""The CLI options of a topic, made from `core.models.TopicOptions` (declared once, there).

`with_topic_options(defaults=True)` adds one `--flag` per TopicOptions field to a typer command
(its bounds, default and description from the field) and hands the command a `TopicOptions`
as its `options` argument. With `defaults=False` (batch) every flag defaults to unset: a CSV
row's own column wins, then the flag, then the field's default.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

import typer
from annotated_types import Ge, Le
from pydantic import ValidationError

from core.models import TOPIC_OPTIONS, TopicOptions


def _bounds(name: str) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for rule in TopicOptions.model_fields[name].metadata:
        if isinstance(rule, Ge):
            bounds["min"] = rule.ge
        elif isinstance(rule, Le):
            bounds["max"] = rule.le
    return bounds


def _parameter(name: str, defaults: bool) -> inspect.Parameter:
    field = TopicOptions.model_fields[name]
    default = field.default if defaults else None
    help_text = field.description or ""
    if not defaults and field.default is not None:
        help_text += f" Default {field.default}."
    annotation = Optional[field.annotation] if not defaults else field.annotation  # type: ignore
    option = typer.Option(default, f"--{name.replace('_', '-')}", help=help_text,
                          **_bounds(name))
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option,
                             annotation=annotation)


def with_topic_options(*, defaults: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a typer command the TopicOptions flags; it receives them as `options`."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command).parameters.values() if p.name != "options"]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            given = {k: kwargs.pop(k) for k in TOPIC_OPTIONS}
            try:
                options = TopicOptions(**{k: v for k, v in given.items() if v is not None})
            except ValidationError as exc:
                from flows.console import fail

                problems = "; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: "
                                     f"{e['msg']}" for e in exc.errors())
                fail(problems)
            return command(options=options, **kwargs)

        wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            own + [_parameter(name, defaults) for name in TOPIC_OPTIONS])
        return wrapper

    return decorate

