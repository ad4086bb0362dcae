"""One TopicOptions model (issue 25 item 5): every field is a flag of `run` and of `batch`, a
CSV column, and a parameter of both flows; nothing else declares a per-topic option."""

from __future__ import annotations

import inspect

from typer.main import get_command

from core.models import TOPIC_OPTIONS, TopicOptions
from core.topics.rows import OVERRIDES
from flows.batch import research_batch
from flows.cli import app
from flows.topic import research_topic


def _flags(name: str) -> set[str]:
    group = get_command(app)
    command = group.commands[name]  # type: ignore[attr-defined]
    return {opt for p in command.params for opt in p.opts if opt.startswith("--")}


def test_every_option_is_a_flag_of_run_and_batch() -> None:
    wanted = {f"--{name.replace('_', '-')}" for name in TOPIC_OPTIONS}
    for name in ("run", "batch"):
        assert wanted <= _flags(name), (name, wanted - _flags(name))


def test_every_option_is_a_csv_column_and_the_flows_take_the_model() -> None:
    assert tuple(OVERRIDES) == TOPIC_OPTIONS == tuple(TopicOptions.model_fields)
    topic = inspect.signature(research_topic.fn).parameters
    batch = inspect.signature(research_batch.fn).parameters
    assert topic["options"].annotation in (TopicOptions, "TopicOptions")
    assert batch["defaults"].annotation in (TopicOptions, "TopicOptions")
    # No flow declares an option of its own beside the model.
    assert not set(TOPIC_OPTIONS) & (set(topic) | set(batch))


def test_a_batch_flag_left_unset_is_none_so_a_csv_column_wins() -> None:
    group = get_command(app)
    batch = group.commands["batch"]  # type: ignore[attr-defined]
    defaults = {p.name: p.default for p in batch.params if p.name in TOPIC_OPTIONS}
    assert set(defaults) == set(TOPIC_OPTIONS) and set(defaults.values()) == {None}
