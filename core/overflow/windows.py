"""How many tokens a model takes: context windows, output caps, and what overflows taught us.

`ContextLimits` answers `window(model)`, `max_output(model)` and `request_budget(model)` from, in
order of trust: what an overflow error reported during this run (`learn`) or the model's server
said when asked (`teach_window`, only for a model known no better), the configured
overrides (`Settings.context_windows`, prefix -> tokens), what errors taught earlier runs
(`remembered`, persisted per model in DuckDB through `on_learn`; `kept_in(store)` wires both to
a run's store), the built-in table below, and
finally `Settings.default_context_window` with a log line saying how to configure it. Names match by the
longest known prefix (overrides and table compete; an override wins a tie), so
"gpt-4o-mini-2024-07-18" resolves to gpt-4o-mini (never gpt-4o), and dated or provider-prefixed
names ("claude-sonnet-4-5-20250929", "openai/gpt-4o", "models/gemini-2.5-pro",
"openai:gpt-4o-mini") work. It does not count tokens or call providers.

A per-request token budget ("Request too large … TPM: Limit 30000") is kept apart from windows: it
is not the model's window, but it bounds every request until the run ends.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from core.signals import ContextOverflow, Signal

log = logging.getLogger("researchflow.limits")


@dataclass(frozen=True)
class ModelLimits:
    window: int  # tokens of input + output the model accepts in one request
    max_output: int | None = None  # the largest max_tokens it accepts, when known


# Published figures (vendor model pages, 2024-2025). Longest prefix wins, so each family that
# differs from its parent has its own row (gpt-4o-mini vs gpt-4o, o1-mini vs o1, gpt-4 vs gpt-4o).
KNOWN: dict[str, ModelLimits] = {
    # OpenAI
    "gpt-3.5-turbo": ModelLimits(16_385, 4_096),
    "gpt-4": ModelLimits(8_192, 8_192),
    "gpt-4-32k": ModelLimits(32_768, 8_192),
    "gpt-4-turbo": ModelLimits(128_000, 4_096),
    "gpt-4-1106": ModelLimits(128_000, 4_096),
    "gpt-4-0125": ModelLimits(128_000, 4_096),
    "gpt-4o": ModelLimits(128_000, 16_384),
    "gpt-4o-mini": ModelLimits(128_000, 16_384),
    "chatgpt-4o": ModelLimits(128_000, 16_384),
    "gpt-4.1": ModelLimits(1_047_576, 32_768),
    "gpt-4.5": ModelLimits(128_000, 16_384),
    "gpt-5": ModelLimits(400_000, 128_000),
    "gpt-5-chat": ModelLimits(128_000, 16_384),
    "gpt-5.1-chat": ModelLimits(128_000, 16_384),
    "gpt-5-pro": ModelLimits(400_000, 272_000),
    # GPT-5.2 to GPT-6 (the openai 3.57 SDK's ChatModel list). Figures from OpenAI's model pages
    # (developers.openai.com/api/docs/models/<id>) as collected by models.dev
    # (anomalyco/models.dev models/openai/<id>.toml, read 2026-07 to 2026-09): 400k windows up to
    # 5.2 and for the 5.4 mini/nano; 1.05M from 5.4 on; 128k output; chat models 128k/16,384.
    "gpt-5.2": ModelLimits(400_000, 128_000),
    "gpt-5.2-chat": ModelLimits(128_000, 16_384),
    "gpt-5.3-chat": ModelLimits(128_000, 16_384),
    "gpt-5.4": ModelLimits(1_050_000, 128_000),
    "gpt-5.4-mini": ModelLimits(400_000, 128_000),
    "gpt-5.4-nano": ModelLimits(400_000, 128_000),
    "gpt-5.5": ModelLimits(1_050_000, 128_000),
    "gpt-5.6": ModelLimits(1_050_000, 128_000),  # sol, terra, luna
    "gpt-6": ModelLimits(1_050_000, 128_000),  # astra, sol, luna
    "gpt-oss": ModelLimits(131_072, 131_072),
    "o1": ModelLimits(200_000, 100_000),
    "o1-mini": ModelLimits(128_000, 65_536),
    "o1-preview": ModelLimits(128_000, 32_768),
    "o3": ModelLimits(200_000, 100_000),
    "o4-mini": ModelLimits(200_000, 100_000),
    # Anthropic (claude names are normalised to dashes: "claude-3.5-sonnet" -> "claude-3-5-sonnet")
    "claude": ModelLimits(200_000),  # every Claude since 3 has a 200k window
    "claude-2": ModelLimits(100_000, 4_096),
    "claude-2-1": ModelLimits(200_000, 4_096),
    "claude-3-haiku": ModelLimits(200_000, 4_096),
    "claude-3-sonnet": ModelLimits(200_000, 4_096),
    "claude-3-opus": ModelLimits(200_000, 4_096),
    "claude-3-5-sonnet": ModelLimits(200_000, 8_192),
    "claude-3-5-haiku": ModelLimits(200_000, 8_192),
    "claude-3-7-sonnet": ModelLimits(200_000, 64_000),
    "claude-sonnet-4": ModelLimits(200_000, 64_000),
    "claude-opus-4": ModelLimits(200_000, 32_000),
    "claude-opus-4-5": ModelLimits(200_000, 64_000),
    "claude-haiku-4": ModelLimits(200_000, 64_000),
    # Claude 4.6 and later (the anthropic 2.15 SDK's Model list): 1M windows, 128k output (Sonnet
    # 4.6: 64k). From Anthropic's model overviews (platform.claude.com/docs/en/models/<model>)
    # as collected by models.dev (models/anthropic/<id>.toml, read 2026-07 to 2026-10).
    "claude-opus-4-6": ModelLimits(1_000_000, 128_000),
    "claude-opus-4-7": ModelLimits(1_000_000, 128_000),
    "claude-opus-4-8": ModelLimits(1_000_000, 128_000),
    "claude-sonnet-4-6": ModelLimits(1_000_000, 64_000),
    "claude-sonnet-5": ModelLimits(1_000_000, 128_000),
    "claude-opus-5": ModelLimits(1_000_000, 128_000),
    "claude-fable-5": ModelLimits(1_000_000, 128_000),
    "claude-mythos-5": ModelLimits(1_000_000, 128_000),
    "claude-haiku-5": ModelLimits(1_000_000, 128_000),  # Haiku 5.5
    # Google Gemini (the window is the input limit; output is capped separately)
    "gemini-1.0-pro": ModelLimits(32_760, 8_192),
    "gemini-pro": ModelLimits(32_760, 8_192),
    "gemini-1.5-pro": ModelLimits(2_097_152, 8_192),
    "gemini-1.5-flash": ModelLimits(1_048_576, 8_192),
    "gemini-2.0-flash": ModelLimits(1_048_576, 8_192),
    "gemini-2.0-pro": ModelLimits(2_097_152, 8_192),
    "gemini-2.5-pro": ModelLimits(1_048_576, 65_536),
    "gemini-2.5-flash": ModelLimits(1_048_576, 65_536),
    "gemini-2.5-flash-image": ModelLimits(32_768, 32_768),
    # Every Gemini 3.x text model (3 Pro/Flash, 3.1 Pro/Flash-Lite, 3.5 Flash): 1,048,576 in,
    # 65,536 out (ai.google.dev/gemini-api/docs/models/<id>, e.g. gemini-3.1-pro-preview).
    "gemini-3": ModelLimits(1_048_576, 65_536),
    # Common OpenAI-compatible models
    "deepseek-chat": ModelLimits(128_000, 8_192),
    "deepseek-reasoner": ModelLimits(128_000, 64_000),
    "mistral-large": ModelLimits(131_072),
    "mistral-small": ModelLimits(131_072),
    "llama-3.1": ModelLimits(131_072),
    "llama-3.3": ModelLimits(131_072),
}

# Kinds of reported limit that are a window in tokens (others are chars or bytes: not learned).
_WINDOW_KINDS = {None, "context_window", "context_window_incl_output", "input_window"}
# "openai:gpt-4o" names a provider, but "llama3:8b" is an Ollama tag: strip only known providers.
_PROVIDER_PREFIX = re.compile(r"^(?:openai|anthropic|gemini|google|vertex_ai|vertex|azure|bedrock|"
                              r"openrouter|ollama|groq|mistral|deepseek|vllm|litellm|together):")
_BEDROCK_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?anthropic\.")  # "us.anthropic.claude-…-v1:0"
ENV_HINT = "RESEARCHFLOW_CONTEXT_WINDOWS"


def normalize(model: str) -> str:
    """Lower case, no provider prefix ("openai/", "anthropic:", "models/"), dashes in claude
    version numbers ("claude-3.5-sonnet" -> "claude-3-5-sonnet")."""
    name = _PROVIDER_PREFIX.sub("", model.strip().lower())
    name = name.rsplit("/", 1)[-1] or name  # "openai/gpt-4o", "models/gemini-2.5-pro"
    name = _BEDROCK_PREFIX.sub("", name)
    if name.startswith("claude"):
        name = name.replace(".", "-")
    return name


def _longest_prefix(name: str, table: Mapping[str, Any]) -> str | None:
    best = None
    for prefix in table:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


class LimitsMemory(Protocol):
    """Where limits outlive a run (core.store.ResultStore)."""

    def learned_limits(self) -> dict[str, dict[str, int]]: ...

    def remember_limits(self, model: str, **taught: int) -> None: ...


class ContextLimits:
    """Windows and budgets per model, learned from overflows for the rest of the run.
    Thread-safe: tasks call it from worker threads."""

    @classmethod
    def kept_in(cls, memory: LimitsMemory, overrides: Mapping[str, int] | None = None,
                default: int = 128_000) -> "ContextLimits":
        """Limits that start from what earlier runs left in `memory` (a run's store) and leave
        there what this run learns; a memory that cannot be read starts empty."""
        try:
            remembered = memory.learned_limits()
        except Exception as exc:  # noqa: BLE001 - remembering is a bonus, never a failure
            log.warning("could not read remembered model limits (%s); starting without", exc)
            remembered = {}
        return cls(overrides, default, remembered=remembered,
                   on_learn=lambda model, taught: memory.remember_limits(model, **taught))

    def __init__(self, overrides: Mapping[str, int] | None = None, default: int = 128_000,
                 known: Mapping[str, ModelLimits] | None = None, *,
                 remembered: Mapping[str, Mapping[str, int]] | None = None,
                 on_learn: Callable[[str, dict[str, int]], None] | None = None) -> None:
        self.default = default
        self._known = dict(KNOWN if known is None else known)
        # What earlier runs learned: normalised name -> {context_window|max_output|request_budget}
        self._remembered = {normalize(k): dict(v) for k, v in (remembered or {}).items()}
        self._on_learn = on_learn
        # Overrides match the raw lower-cased name (to allow "openai/gpt-4o") and the normal form.
        self._overrides = {k.strip().lower(): int(v) for k, v in (overrides or {}).items()}
        self._learned_window: dict[str, int] = {}
        self._learned_budget: dict[str, int] = {}
        self._learned_output: dict[str, int] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def window(self, model: str) -> int:
        """The model's context window in tokens: learned > override > table > default."""
        name = normalize(model)
        with self._lock:
            if name in self._learned_window:
                return self._learned_window[name]
        # One longest-prefix contest over overrides and table (an override wins a tie), so an
        # override for "gpt-4o" does not capture gpt-4o-mini, which the table knows better.
        override = self._override(model)
        prefix = _longest_prefix(name, self._known)
        if override is not None and (prefix is None or override[0] >= len(prefix)):
            return override[1]
        remembered = self._remembered.get(name, {}).get("context_window")
        if remembered:
            return remembered
        if prefix is not None:
            return self._known[prefix].window
        self._warn_unknown(model)
        return self.default

    def max_output(self, model: str) -> int | None:
        """The largest max_tokens the model accepts, when known (learned from a cap error first)."""
        name = normalize(model)
        with self._lock:
            if name in self._learned_output:
                return self._learned_output[name]
        remembered = self._remembered.get(name, {}).get("max_output")
        if remembered:
            return remembered
        prefix = _longest_prefix(name, self._known)
        return self._known[prefix].max_output if prefix is not None else None


    def request_budget(self, model: str) -> int:
        """Tokens one request (input + max_tokens) may use: the window, or less when the
        provider's per-minute budget is smaller than one window."""
        window = self.window(model)
        name = normalize(model)
        with self._lock:
            budget = self._learned_budget.get(name)
        if budget is None:
            budget = self._remembered.get(name, {}).get("request_budget")
        return min(window, budget) if budget is not None else window

    def known(self, model: str) -> bool:
        """Whether the window comes from somewhere better than the default."""
        name = normalize(model)
        return (name in self._learned_window or self._override(model) is not None
                or bool(self._remembered.get(name, {}).get("context_window"))
                or _longest_prefix(name, self._known) is not None)

    def teach_window(self, model: str, tokens: int, source: str) -> None:
        """Take the window a server says it runs the model with (core.llm.discovery) as learned
        for this run. Not remembered in the store: the server may be restarted with another."""
        if tokens <= 0:
            return
        with self._lock:
            self._learned_window[normalize(model)] = tokens
        log.info("context window %d for %r from %s", tokens, model, source)

    def learn(self, model: str | None, signal: Signal) -> None:
        """Remember what an error reported: an overflow's limit (a window, or a per-request
        budget for `tpm_per_request`), or an output cap (`Fatal.max_output`)."""
        model = model or signal.model
        if not model:
            return
        name = normalize(model)
        limit = getattr(signal, "limit", None)
        kind = getattr(signal, "limit_kind", None)
        cap = getattr(signal, "max_output", None)
        taught: dict[str, int] = {}
        with self._lock:
            if isinstance(cap, int) and cap > 0:
                self._learned_output[name] = taught["max_output"] = cap
            if isinstance(signal, ContextOverflow) and isinstance(limit, int) and limit > 0:
                if kind == "tpm_per_request":
                    previous = self._learned_budget.get(name)
                    budget = limit if previous is None else min(previous, limit)
                    self._learned_budget[name] = taught["request_budget"] = budget
                elif kind in _WINDOW_KINDS:
                    self._learned_window[name] = taught["context_window"] = limit
        if not taught:
            return
        log.info("learned %s for model %r from a provider error", taught, model)
        if self._on_learn is not None:
            try:
                self._on_learn(name, taught)
            except Exception as exc:  # noqa: BLE001 - remembering is a bonus, never a failure
                log.warning("could not remember the limits of %r: %s", model, exc)

    def _override(self, model: str) -> tuple[int, int] | None:
        """(length of the matching prefix, tokens) of the best override, matched against the
        name as given ("openai/gpt-4o") and its normal form ("gpt-4o")."""
        best: tuple[int, int] | None = None
        for candidate in (model.strip().lower(), normalize(model)):
            prefix = _longest_prefix(candidate, self._overrides)
            if prefix is not None and (best is None or len(prefix) > best[0]):
                best = (len(prefix), self._overrides[prefix])
        return best

    def _warn_unknown(self, model: str) -> None:
        with self._lock:
            if model in self._warned:
                return
            self._warned.add(model)
        log.warning("No context window known for model %r; assuming %d tokens. Set it with "
                    "%s='{\"%s\": 200000}' (a model-name prefix -> tokens), or change the "
                    "fallback with RESEARCHFLOW_DEFAULT_CONTEXT_WINDOW.",
                    model, self.default, ENV_HINT, normalize(model))


def published_max_output(model: str) -> int | None:
    """The largest max_tokens the published table (KNOWN) says the model accepts, when it says:
    nothing learned, so the same answer in any run."""
    prefix = _longest_prefix(normalize(model), KNOWN)
    return KNOWN[prefix].max_output if prefix is not None else None
