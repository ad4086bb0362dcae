"""The model engines a RunConfig names: one `LLMEngine` per model, behind the run's meter, and a
`RoutedEngine` over them when roles run on different models.

Before a compatible server's model is first called, the server is asked its window when nothing
better than the default is known (no override, table entry or learned limit): a local server's
`-c` is rarely the model's training context (core.llm.discovery).
"""

from __future__ import annotations

from pathlib import Path

from core.accounting.metering import Billing
from core.engine.model_driven.llm_engine import LLMEngine
from core.engine.model_driven.revisions import Revisions
from core.engine.model_driven.routed import RoutedEngine
from core.llm.base import ChatModel
from core.llm.discovery import discover_window
from core.llm.registry import OpenAICompatibleChat, make_model
from core.overflow.windows import ContextLimits
from core.settings import EnvironmentKeys, RunConfig


def model_engine(config: RunConfig, limits: ContextLimits, billing: Billing,
                 keys: EnvironmentKeys | None = None) -> LLMEngine | RoutedEngine:
    """The engine of `config.model`, or one per role that differs, routed by role; each model's
    key is what `keys` reads (default: the environment's)."""
    def engine_for(spec: str) -> LLMEngine:
        model = make_model(spec, config, keys=keys)
        _window_from_server(model, limits)
        return LLMEngine(billing.model(model), limits=limits, estimator=billing.estimator,
                         max_output_tokens=config.max_output_tokens,
                         spill_dir=Path(config.cache_dir) / "spill",
                         revisions=Revisions(billing.memo, model))

    engine = engine_for(config.model)
    if not config.role_models:
        return engine
    specs = dict(config.role_models)
    built = {spec: engine_for(spec) for spec in sorted(set(specs.values()))}
    return RoutedEngine(engine, {role: built[spec] for role, spec in specs.items()})


def _window_from_server(model: ChatModel, limits: ContextLimits) -> None:
    if not isinstance(model, OpenAICompatibleChat) or not model.base_url \
            or limits.known(model.model):
        return
    found = discover_window(model.base_url, model.model, api_key=model.api_key)
    if found is not None:
        limits.teach_window(model.model, found.tokens, found.source)
