"""What a call costs: a price table by model prefix, overridable, and the arithmetic.

Prices are US dollars per million tokens (input, cached input, output) as the providers publish
them for their standard tier, plus a flat price per call for services billed per request
(SerpAPI). A model is matched by its longest known prefix, so dated snapshots
("gpt-4o-mini-2024-07-18") and router names ("openai/gpt-4o-mini") find their family.

Overrides come from `RESEARCHFLOW_PRICES`: JSON text, or the path of a JSON file, of the form
`{"my-model": {"input": 0.5, "cached_input": 0.05, "output": 1.5}}`; an override wins over the
table for its prefix. An unknown model has no price: its cost is None (stored as NULL) and one
warning per model says how to add it. Output includes reasoning/thinking tokens, as billed.
What it does not do: fetch prices (there is no network), or model long-context surcharges
(Gemini Pro above 200k tokens): the standard tier is used.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger("researchflow.prices")


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens (reasoning included)
    cached_input: float | None = None  # USD per million cached input tokens; None: as input
    per_call: float = 0.0  # USD per request (search APIs)


# Published list prices, standard tier (checked 2025; override with RESEARCHFLOW_PRICES).
PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5.1": Price(1.25, 10.00, 0.125),
    # GPT-5.2 to GPT-6: OpenAI's model pages (developers.openai.com/api/docs/models/<id>) as
    # collected by models.dev (providers/openai/models/<id>.toml, read 2026-07 to 2026-09);
    # standard tier, prompts up to 272k tokens (longer ones cost more: not modelled). GPT-6 Sol
    # and Luna had no published price there: add them with RESEARCHFLOW_PRICES.
    "gpt-5.2": Price(1.75, 14.00, 0.175),
    "gpt-5.2-pro": Price(21.00, 168.00),
    "gpt-5.3-chat": Price(1.75, 14.00, 0.175),
    "gpt-5.4": Price(2.50, 15.00, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5.4-nano": Price(0.20, 1.25, 0.02),
    "gpt-5.4-pro": Price(30.00, 180.00),
    "gpt-5.5": Price(5.00, 30.00, 0.50),
    "gpt-5.5-pro": Price(30.00, 180.00),
    "gpt-5.6-sol": Price(2.00, 10.00, 0.20),
    "gpt-5.6-terra": Price(2.50, 15.00, 0.25),
    "gpt-5.6-luna": Price(1.00, 6.00, 0.10),
    "gpt-6-astra": Price(10.00, 50.00, 1.00),
    "o1": Price(15.00, 60.00, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-pro": Price(20.00, 80.00),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic (cached = cache reads; cache writes are charged as input here)
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
    "claude-opus-4": Price(15.00, 75.00, 1.50),
    "claude-opus-4-1": Price(15.00, 75.00, 1.50),
    "claude-opus-4-5": Price(5.00, 25.00, 0.50),
    # Claude 4.6 and later: Anthropic's pricing page (platform.claude.com/docs/en/about-claude/
    # pricing) as collected by models.dev (providers/anthropic/models/<id>.toml, read 2026-07 to
    # 2026-10). Haiku 5.5 and Mythos had no published price there.
    "claude-opus-4-6": Price(5.00, 25.00, 0.50),
    "claude-opus-4-7": Price(5.00, 25.00, 0.50),
    "claude-opus-4-8": Price(5.00, 25.00, 0.50),
    "claude-sonnet-4-6": Price(3.00, 15.00, 0.30),
    "claude-sonnet-5": Price(2.00, 10.00, 0.20),
    "claude-sonnet-5-5": Price(2.00, 10.00, 0.10),
    "claude-opus-5": Price(5.00, 25.00, 0.50),
    "claude-opus-5-5": Price(4.00, 20.00, 0.20),
    "claude-fable-5": Price(10.00, 50.00, 1.00),
    # Google Gemini (paid tier, prompts up to 200k tokens)
    "gemini-2.0-flash-lite": Price(0.075, 0.30, 0.01875),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-3-pro": Price(2.00, 12.00, 0.20),
    # Gemini 3.x: ai.google.dev/gemini-api/docs/pricing as collected by models.dev
    # (providers/google/models/<id>.toml, read 2026-07 to 2026-10). 3.8 Flash is at its
    # introductory price, published as valid through 2026-12-31 (then 1.50 / 7.50 / 0.15).
    "gemini-3-flash": Price(0.50, 3.00, 0.05),
    "gemini-3.1-pro": Price(2.00, 12.00, 0.20),
    "gemini-3.1-flash-lite": Price(0.25, 1.50, 0.025),
    "gemini-3.5-flash": Price(1.50, 9.00, 0.15),
    "gemini-3.7-flash": Price(1.50, 7.50, 0.15),
    "gemini-3.8-flash": Price(0.75, 3.75, 0.075),
    # Search: SerpAPI's Developer plan, $75 for 5,000 searches
    "serpapi": Price(0.0, 0.0, per_call=0.015),
    "searxng": Price(0.0, 0.0, per_call=0.0),  # self-hosted: recorded, free
}


class PriceError(ValueError):
    """RESEARCHFLOW_PRICES could not be read; the message says what to fix."""


def parse_overrides(value: str | Mapping[str, Any] | None) -> dict[str, Price]:
    """Overrides from JSON text, a JSON file's path, or an already parsed mapping."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("{"):
            path = Path(text).expanduser()
            if not path.is_file():
                raise PriceError(f"RESEARCHFLOW_PRICES={value!r} is neither JSON nor a file")
            text = path.read_text(encoding="utf-8")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PriceError(f"RESEARCHFLOW_PRICES is not valid JSON: {exc}") from exc
    if not isinstance(value, Mapping):
        raise PriceError("RESEARCHFLOW_PRICES must be a JSON object of model prefix -> price")
    out: dict[str, Price] = {}
    for prefix, entry in value.items():
        if not isinstance(entry, Mapping) or not {"input", "output"} <= set(entry) and \
                "per_call" not in entry:
            raise PriceError(f"RESEARCHFLOW_PRICES[{prefix!r}] needs \"input\" and \"output\" "
                             "(USD per million tokens), or \"per_call\"")
        try:
            out[str(prefix).lower()] = Price(
                input=float(entry.get("input", 0.0)), output=float(entry.get("output", 0.0)),
                cached_input=(float(entry["cached_input"])
                              if entry.get("cached_input") is not None else None),
                per_call=float(entry.get("per_call", 0.0)))
        except (TypeError, ValueError) as exc:
            raise PriceError(f"RESEARCHFLOW_PRICES[{prefix!r}]: prices must be numbers") from exc
    return out


class PriceTable:
    """Prices by longest model prefix; the overrides compete with the table on equal terms."""

    def __init__(self, overrides: str | Mapping[str, Any] | None = None) -> None:
        self._prices = {**PRICES, **parse_overrides(overrides)}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def lookup(self, model: str) -> Price | None:
        name = model.strip().lower()
        candidates = [name, name.rsplit("/", 1)[-1]]  # "openai/gpt-4o-mini" on routers
        for candidate in candidates:
            best = max((p for p in self._prices if candidate.startswith(p)), key=len,
                       default=None)
            if best is not None:
                return self._prices[best]
        with self._lock:
            if name not in self._warned:
                self._warned.add(name)
                log.warning("no price known for model %r: its calls are recorded with cost "
                            "NULL and budgets cannot count them; add it with "
                            "RESEARCHFLOW_PRICES='{\"%s\": {\"input\": USD_PER_M, "
                            "\"output\": USD_PER_M}}'", model, model)
        return None

    def cost(self, model: str, *, input_tokens: int | None = None,
             cached_input_tokens: int | None = None, output_tokens: int | None = None,
             calls: int = 1) -> float | None:
        """USD for one call's usage, or None when the model has no price."""
        price = self.lookup(model)
        if price is None:
            return None
        cached = min(cached_input_tokens or 0, input_tokens or 0)
        fresh = (input_tokens or 0) - cached
        cached_rate = price.input if price.cached_input is None else price.cached_input
        return (fresh * price.input + cached * cached_rate
                + (output_tokens or 0) * price.output) / 1_000_000 + price.per_call * calls
