"""Build (once per process) the engine, search backend and limits a RunConfig names.

Tasks call these factories instead of receiving live clients: clients are not hashable or
picklable, and keys must stay out of task inputs. API keys are read from the environment here,
at call time, never from the RunConfig.
"""

from __future__ import annotations

import threading
from pathlib import Path

from core.engine.base import ResearchEngine
from core.engine.extractive import ExtractiveEngine
from core.limits import ContextLimits
from core.search.base import SearchBackend
from core.settings import RunConfig, Settings

_lock = threading.Lock()
_engines: dict[RunConfig, ResearchEngine] = {}
_searches: dict[RunConfig, SearchBackend] = {}
_limits: dict[tuple, ContextLimits] = {}


def _settings(config: RunConfig) -> Settings:
    return Settings.load(model=config.model, search=config.search,
                         corpus_dir=Path(config.corpus_dir) if config.corpus_dir else None,
                         cache_dir=Path(config.cache_dir), db_path=Path(config.db_path),
                         results_per_query=config.results_per_query,
                         max_output_tokens=config.max_output_tokens,
                         default_context_window=config.default_context_window,
                         context_windows=dict(config.context_windows))


def context_limits(config: RunConfig) -> ContextLimits:
    """One limits registry per process and configuration, so learned windows persist."""
    key = (config.context_windows, config.default_context_window)
    with _lock:
        if key not in _limits:
            _limits[key] = ContextLimits(dict(config.context_windows),
                                         default=config.default_context_window)
        return _limits[key]


def build_engine(config: RunConfig) -> ResearchEngine:
    with _lock:
        engine = _engines.get(config)
    if engine is not None:
        return engine
    if config.model == "offline":
        engine = ExtractiveEngine()
    else:
        from core.engine.llm import LLMEngine
        from core.llm.registry import make_model

        settings = _settings(config)
        engine = LLMEngine(make_model(config.model, settings), limits=context_limits(config),
                           max_output_tokens=config.max_output_tokens,
                           spill_dir=Path(config.cache_dir) / "spill")
    with _lock:
        return _engines.setdefault(config, engine)


def build_search(config: RunConfig) -> SearchBackend:
    from core.search.registry import make_search

    search_key = config.model_copy(update={"model": "-"})  # one backend whatever the model
    with _lock:
        backend = _searches.get(search_key)
    if backend is None:
        backend = make_search(_settings(config))
        with _lock:
            backend = _searches.setdefault(search_key, backend)
    return backend


def reset() -> None:
    """Forget built clients (tests, or after settings change in a long-lived process)."""
    with _lock:
        _engines.clear()
        _searches.clear()
        _limits.clear()
