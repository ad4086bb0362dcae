"""core.accounting.prices: longest-prefix lookup, the default models' prices, cost arithmetic
(cached input at its own rate), RESEARCHFLOW_PRICES overrides (JSON text or file) and their errors,
and the one warning an unknown model gets."""

from __future__ import annotations

import json
import logging

import pytest

from core.accounting.prices import PRICES, Price, PriceError, PriceTable, parse_overrides


# --- lookup -----------------------------------------------------------------------------------

def test_a_dated_snapshot_finds_its_own_family_not_a_shorter_prefix() -> None:
    table = PriceTable()

    assert table.lookup("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert table.lookup("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert PRICES["gpt-4o-mini"] != PRICES["gpt-4o"]  # else the first line proves nothing


@pytest.mark.parametrize("model, family", [
    ("openai/gpt-4o-mini", "gpt-4o-mini"),
    ("openrouter/openai/gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("anthropic/claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("GPT-4o-Mini", "gpt-4o-mini"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
    ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
])
def test_router_names_case_and_longest_prefix(model: str, family: str) -> None:
    assert PriceTable().lookup(model) == PRICES[family]


@pytest.mark.parametrize("model", ["gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"])
def test_every_default_model_the_readme_names_has_a_price(model: str) -> None:
    price = PriceTable().lookup(model)

    assert price is not None
    assert price.input > 0 and price.output > price.input
    assert price.cached_input is not None and price.cached_input < price.input


def test_serpapi_is_priced_per_call() -> None:
    table = PriceTable()
    price = table.lookup("serpapi")

    assert price is not None and price.per_call > 0
    assert table.cost("serpapi") == pytest.approx(price.per_call)
    assert table.cost("serpapi", calls=3) == pytest.approx(3 * price.per_call)


# --- arithmetic -------------------------------------------------------------------------------

def test_cost_of_fresh_input_and_output() -> None:
    # gpt-4o-mini: $0.15 in, $0.60 out per million
    cost = PriceTable().cost("gpt-4o-mini", input_tokens=1_000_000, output_tokens=500_000)

    assert cost == pytest.approx(0.15 + 0.30)


def test_cached_input_is_charged_at_the_cached_rate() -> None:
    # 1,200 in of which 800 cached, 350 out: 400 * 0.15 + 800 * 0.075 + 350 * 0.60 per million
    cost = PriceTable().cost("gpt-4o-mini", input_tokens=1_200, cached_input_tokens=800,
                             output_tokens=350)

    assert cost == pytest.approx((60 + 60 + 210) / 1_000_000)
    assert cost < PriceTable().cost("gpt-4o-mini", input_tokens=1_200, output_tokens=350)


def test_more_cached_than_input_is_clamped_to_the_input() -> None:
    table = PriceTable()

    clamped = table.cost("claude-sonnet-4-5", input_tokens=100, cached_input_tokens=5_000,
                         output_tokens=0)

    assert clamped == pytest.approx(table.cost("claude-sonnet-4-5", input_tokens=100,
                                               cached_input_tokens=100))
    assert clamped == pytest.approx(100 * 0.30 / 1_000_000)


def test_a_price_without_a_cached_rate_charges_cached_input_as_input() -> None:
    table = PriceTable({"plain-model": {"input": 2.0, "output": 4.0}})

    assert table.cost("plain-model", input_tokens=1_000, cached_input_tokens=600) == \
        pytest.approx(1_000 * 2.0 / 1_000_000)


def test_missing_counts_cost_nothing() -> None:
    assert PriceTable().cost("gpt-4o-mini") == 0.0
    assert PriceTable().cost("gpt-4o-mini", input_tokens=None, output_tokens=None) == 0.0


# --- overrides --------------------------------------------------------------------------------

def test_override_from_json_text() -> None:
    table = PriceTable('{"My-Model": {"input": 0.5, "cached_input": 0.05, "output": 1.5}}')

    assert table.lookup("my-model-v2") == Price(0.5, 1.5, 0.05)
    assert table.cost("my-model", input_tokens=2_000, cached_input_tokens=1_000,
                      output_tokens=1_000) == pytest.approx((500 + 50 + 1_500) / 1_000_000)


def test_override_from_a_json_file_path(tmp_path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"local-llm": {"input": 0, "output": 0},
                                "my-search": {"per_call": 0.002}}), encoding="utf-8")

    table = PriceTable(str(path))

    assert table.lookup("local-llm:8b") == Price(0.0, 0.0)
    assert table.cost("my-search") == pytest.approx(0.002)
    assert table.lookup("gpt-4o-mini") == PRICES["gpt-4o-mini"]  # the table is still there


def test_an_override_beats_the_table_for_its_prefix_only() -> None:
    table = PriceTable({"gpt-4o-mini": {"input": 9.0, "output": 9.0}})

    assert table.lookup("gpt-4o-mini-2024-07-18") == Price(9.0, 9.0)
    assert table.lookup("gpt-4o") == PRICES["gpt-4o"]
    assert PriceTable().lookup("gpt-4o-mini") == PRICES["gpt-4o-mini"]  # no global change


def test_a_longer_override_prefix_wins_for_its_snapshot() -> None:
    table = PriceTable({"gpt-4o-mini-2024": {"input": 1.0, "output": 2.0}})

    assert table.lookup("gpt-4o-mini-2024-07-18") == Price(1.0, 2.0)
    assert table.lookup("gpt-4o-mini") == PRICES["gpt-4o-mini"]


@pytest.mark.parametrize("value", [None, ""])
def test_no_overrides(value) -> None:
    assert parse_overrides(value) == {}


@pytest.mark.parametrize("value, says", [
    ("{not json", "not valid JSON"),
    ("/no/such/dir/prices.json", "neither JSON nor a file"),
    ('{"m": {"input": 1.0}}', '"output"'),
    ('{"m": 3}', '"input" and "output"'),
    ('{"m": {"input": "cheap", "output": 1}}', "must be numbers"),
    ('{"m": {"input": null, "output": 1}}', "must be numbers"),
    ('{"m": {"input": 1, "output": 1, "cached_input": "x"}}', "must be numbers"),
])
def test_bad_overrides_say_what_to_fix(value: str, says: str) -> None:
    with pytest.raises(PriceError) as info:
        PriceTable(value)

    assert says in str(info.value)
    assert "RESEARCHFLOW_PRICES" in str(info.value)


def test_a_file_that_is_not_json_or_not_an_object(tmp_path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("input = 1", encoding="utf-8")
    a_list = tmp_path / "list.json"
    a_list.write_text("[1, 2]", encoding="utf-8")

    with pytest.raises(PriceError, match="not valid JSON"):
        parse_overrides(str(broken))
    with pytest.raises(PriceError, match="JSON object"):
        parse_overrides(str(a_list))


def test_price_error_is_a_value_error() -> None:
    assert issubclass(PriceError, ValueError)


# --- unknown models ---------------------------------------------------------------------------

def test_an_unknown_model_costs_none_with_one_warning_per_model(caplog) -> None:
    table = PriceTable()
    caplog.set_level(logging.WARNING, logger="researchflow.prices")

    assert table.cost("mystery-model", input_tokens=10, output_tokens=10) is None
    assert table.cost("mystery-model", input_tokens=99) is None
    assert table.lookup("mystery-model") is None
    assert table.cost("other-mystery") is None

    warnings = [r.getMessage() for r in caplog.records if r.name == "researchflow.prices"]
    assert len(warnings) == 2
    assert "mystery-model" in warnings[0] and "RESEARCHFLOW_PRICES" in warnings[0]
    assert "other-mystery" in warnings[1]


def test_a_known_model_never_warns(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="researchflow.prices")

    PriceTable().cost("openai/gpt-4o-mini", input_tokens=1)

    assert not [r for r in caplog.records if r.name == "researchflow.prices"]
