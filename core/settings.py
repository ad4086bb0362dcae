"""One Settings object for the whole product.

Precedence: explicit argument > environment (RESEARCHFLOW_* and the providers' usual key
variables) > `.env` in the working directory > default. Nothing is read at import time: call
`Settings.load()` when you need them. API keys are `SecretStr` so they never print, and
`public_dict()` is the only form that reaches logs, Prefect parameters or DuckDB.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "researchflow"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RESEARCHFLOW_", env_file=".env",
                                      extra="ignore", populate_by_name=True)

    db_path: Path = Path("researchflow.duckdb")
    # Past one machine. `store`: a DuckLake target ("ducklake:postgres:dbname=rf host=db
    # user=rf", no password: libpq reads PGPASSWORD or ~/.pgpass) that many processes and
    # machines write at once, instead of the file at db_path (one writing process); a db_path
    # written "ducklake:..." names a lake too. `lake_data_path`: where a new lake keeps its
    # Parquet files (a folder every writer mounts at the same path; the catalog remembers it).
    store: str | None = Field(default=None, pattern=r"^ducklake:")
    lake_data_path: str | None = None
    # The runner of a topic's sub-question tasks (flows.runners): "threads" in this process, or
    # "dask" through prefect-dask, on the cluster at dask_address (tcp://host:8786) or, without
    # one, on a LocalCluster of worker processes this process starts.
    task_runner: Literal["threads", "dask"] = "threads"
    dask_address: str | None = None
    cache_dir: Path = Field(default_factory=default_cache_dir)
    corpus_dir: Path | None = None  # None: the bundled CPython documentation corpus

    # "auto" picks the first provider whose key is set, else the offline extractive engine.
    model: str = "auto"
    # A model per role ("provider:model"); unset roles use `model`. With `model` on auto,
    # condense defaults to a cheaper model of the same provider (core.llm.registry.cheaper).
    model_plan: str | None = None
    model_research: str | None = None  # chooses follow-up queries
    model_condense: str | None = None
    model_compress: str | None = None
    model_report: str | None = None
    search: str = "auto"  # "auto" | "serpapi" | "corpus"

    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("RESEARCHFLOW_OPENAI_API_KEY", "OPENAI_API_KEY"))
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("RESEARCHFLOW_OPENAI_BASE_URL", "OPENAI_BASE_URL"))
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("RESEARCHFLOW_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("RESEARCHFLOW_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"))
    gemini_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices(
            "RESEARCHFLOW_GEMINI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"))
    gemini_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("RESEARCHFLOW_GEMINI_BASE_URL"))
    serpapi_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("RESEARCHFLOW_SERPAPI_API_KEY",
                                                    "SERPAPI_API_KEY", "SERPAPI_KEY"))
    serpapi_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("RESEARCHFLOW_SERPAPI_BASE_URL"))

    # Context windows: overrides by model prefix, and the window assumed for unknown models.
    context_windows: dict[str, int] = Field(default_factory=dict)
    default_context_window: int = 128_000
    max_output_tokens: int = 4_096
    request_timeout: float = 60.0

    # Reasoning and thinking. `max_output_tokens` stays the ANSWER's budget: a model's thinking
    # allowance is added on top of it per call (see core.llm.base). `reasoning_effort` goes to
    # OpenAI models (None: the model's default; a model that refuses it is asked without it from
    # then on) and sizes a reasoning model's allowance. `thinking_budget` is tokens of
    # thinking: Gemini's thinking_config.thinking_budget (0 turns thinking off where allowed) and
    # Claude's extended thinking (at least 1024; 0 or None: off); for OpenAI reasoning models it
    # sizes the reasoning allowance. None: Gemini 2.5/3 think by default with an 8192-token
    # allowance. Env: RESEARCHFLOW_REASONING_EFFORT, RESEARCHFLOW_THINKING_BUDGET.
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    thinking_budget: int | None = Field(default=None, ge=0)

    results_per_query: int = Field(default=4, ge=1, le=20)
    max_topic_concurrency: int = Field(default=2, ge=1, le=16)
    max_subquestion_workers: int = Field(default=4, ge=1, le=32)
    # Spending: caps in USD (None: no cap), pacing per provider, and price overrides
    # (JSON text or a JSON file's path; see core.prices).
    max_cost_usd: float | None = Field(default=None, gt=0)  # per topic
    max_batch_cost_usd: float | None = Field(default=None, gt=0)
    max_calls_per_minute: int | None = Field(default=None, ge=1)  # per provider
    # Seconds before a provider call's first retry; each further retry waits twice as long
    # (2, 4, 8, 16, 32 s, each +-50% jitter), and at least what the provider's retry-after
    # names. 0: retry at once (the test suite). Read once per process, when tasks/retry.py
    # builds the tasks' retry options (Prefect fixes a task's delays when it is defined).
    retry_backoff: float = Field(default=2.0, ge=0)
    prices: str | None = None

    max_page_bytes: int = 3_000_000  # larger pages are refused, not parsed
    max_source_chars: int = 60_000  # extracted text beyond this is trimmed

    # The web layer (core/search/web.py and friends). Hosts on this comma-separated list
    # (`host` or `host:port`) may be fetched even when they resolve to a private, loopback or
    # link-local address: tests, intranet wikis, staging mirrors. Everything else that resolves
    # there is refused, on every redirect hop and again at connect time.
    fetch_allow_hosts: str | None = None
    page_ttl_hours: float = Field(default=24.0, ge=0)  # page and search cache freshness; 0: off
    respect_robots: bool = True
    max_fetches_per_host: int = Field(default=2, ge=1, le=16)  # at once, per host
    fetch_connect_timeout: float = Field(default=5.0, gt=0)
    fetch_read_timeout: float = Field(default=10.0, gt=0)
    page_deadline: float = Field(default=20.0, gt=0)  # seconds for one page, redirects included
    max_redirects: int = Field(default=5, ge=0, le=20)
    # SerpAPI: engine google | bing | duckduckgo | google_scholar | google_news; location
    # ("Austin, Texas"), interface language (hl, "en") and country (gl, "us").
    serpapi_engine: str = "google"
    serpapi_location: str | None = None
    serpapi_language: str | None = None
    serpapi_country: str | None = None

    @classmethod
    def load(cls, **overrides: Any) -> "Settings":
        """Settings from the environment and .env, with explicit (non-None) overrides on top."""
        return cls(**{k: v for k, v in overrides.items() if v is not None})

    def resolved_model(self) -> str:
        if self.model != "auto":
            return self.model
        if self.openai_api_key or self.openai_base_url:
            return "openai:gpt-5.4-mini"
        if self.anthropic_api_key:
            return "anthropic:claude-sonnet-5"
        if self.gemini_api_key:
            return "gemini:gemini-3.5-flash"
        return "offline"

    def role_models(self) -> dict[str, str]:
        """The model of every role that differs from `resolved_model()` (role -> spec).

        Roles: plan, queries (RESEARCHFLOW_MODEL_RESEARCH), condense, compress, report. The
        offline engine has no roles to split.
        """
        base = self.resolved_model()
        if base == "offline":
            return {}
        chosen = {"plan": self.model_plan, "queries": self.model_research,
                  "condense": self.model_condense, "compress": self.model_compress,
                  "report": self.model_report}
        if chosen["condense"] is None and self.model == "auto":
            from core.llm.registry import cheaper

            chosen["condense"] = cheaper(base)
        return {role: spec for role, spec in chosen.items() if spec and spec != base}

    def store_target(self) -> str:
        """Where results go: a lake named by db_path or `store`, else the file at db_path."""
        if str(self.db_path).startswith("ducklake:"):
            return str(self.db_path)
        return self.store or str(self.db_path.resolve())

    def resolved_search(self) -> str:
        if self.search != "auto":
            return self.search
        return "serpapi" if self.serpapi_api_key else "corpus"

    def public_dict(self) -> dict[str, Any]:
        """What may be logged or stored: every field except secrets, which show as set/unset."""
        out: dict[str, Any] = {}
        for name, value in self:
            if isinstance(value, SecretStr):
                out[name] = "set" if value.get_secret_value() else "unset"
            elif value is None and name.endswith("_api_key"):
                out[name] = "unset"
            else:
                out[name] = str(value) if isinstance(value, Path) else value
        return out


class RunConfig(BaseModel):
    """What a task needs to rebuild its engine and search backend: hashable, secret-free.

    Tasks receive this instead of live clients, so Prefect can hash it into cache keys and
    persist it in results without ever touching an API key (keys stay in the environment).
    """

    model_config = ConfigDict(frozen=True)

    model: str = "offline"
    search: str = "corpus"
    corpus_dir: str | None = None
    cache_dir: str
    db_path: str  # the store target: a file's resolved path, or "ducklake:..." (store_target)
    results_per_query: int = 4
    max_output_tokens: int = 4_096
    default_context_window: int = 128_000
    context_windows: tuple[tuple[str, int], ...] = ()
    role_models: tuple[tuple[str, str], ...] = ()  # (role, spec) where a role differs
    # Set by a refreshing run (its root flow-run id): part of every task's inputs, so cached
    # calls are not reused, while a retry of that same run still reuses its own.
    refresh: str = ""

    @property
    def billed(self) -> bool:
        """Whether any step calls a paid service (an LLM provider, or SerpAPI)."""
        return self.model != "offline" or self.search == "serpapi"


def run_config(settings: Settings) -> RunConfig:
    return RunConfig(
        model=settings.resolved_model(), search=settings.resolved_search(),
        corpus_dir=str(settings.corpus_dir.resolve()) if settings.corpus_dir else None,
        cache_dir=str(settings.cache_dir), db_path=settings.store_target(),
        results_per_query=settings.results_per_query,
        max_output_tokens=settings.max_output_tokens,
        default_context_window=settings.default_context_window,
        context_windows=tuple(sorted(settings.context_windows.items())),
        role_models=tuple(sorted(settings.role_models().items())))
