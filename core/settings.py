"""One Settings object for the whole product.

Precedence: explicit argument > environment (RESEARCHFLOW_* and the providers' usual key
variables) > `.env` in the working directory > default. Nothing is read at import time: call
`Settings.load()` when you need them. API keys are `SecretStr` so they never print, and
`public_dict()` is the only form that reaches logs, Prefect parameters or DuckDB; every key
loaded is also remembered by core.secrets, which masks it by value wherever text leaves.

A `.env` may set keys, but it cannot send a key from the environment elsewhere: a provider's
base URL from `.env` counts only while that provider's key is not in the environment (nor an
explicit argument), and `store`, `dask_address` and `fetch_allow_hosts` come from the
environment only. Lines breaking that are ignored with a warning (core.envfile).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Literal

from dotenv import dotenv_values
from pydantic import (AliasChoices, BaseModel, ConfigDict, Field, SecretStr,
                      ValidationError, field_validator)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from core import secrets
from core.envfile import DotEnvRules


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "researchflow"


class RunFields(BaseModel):
    """The settings a task builds from, under the same name and default in `Settings` (where they
    are read) and in `RunConfig` (what a task receives): written once, here.

    Fields marked `exclude=True` say how the process runs, not what it asks (pacing, prices,
    store locking, the memo's expiry): they are left out of the JSON that Prefect hashes for a
    task's cache key, so changing them never costs a cached call.
    """

    # -- what is asked, and how a model answers -------------------------------------------------
    results_per_query: int = Field(default=4, ge=1, le=20)
    max_output_tokens: int = 4_096
    default_context_window: int = 128_000  # the window assumed for an unknown model
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
    # How OpenAI and compatible servers are asked for JSON. "auto": json_schema first, stepping
    # down to json_object, then to the schema as an instruction, when a server refuses (learned
    # per model). Any other value is sent as is. Env: RESEARCHFLOW_JSON_MODE.
    json_mode: Literal["auto", "json_schema", "json_object", "instruction"] = "auto"
    # A role whose answers stay invalid after its bounded re-asks (a weak model): "extractive"
    # lets the offline engine answer it (core.engine.fallback; the report says so), "none"
    # fails the topic naming the role. Env: RESEARCHFLOW_FALLBACK; `--fallback` on the CLI.
    fallback: Literal["extractive", "none"] = "extractive"

    # -- the corpus (core.search.corpus_files): the folder is untrusted. File symlinks out of it
    # are skipped unless followed here, and larger files are skipped before they are read (HTML
    # has its own, smaller cap: parsing it costs many times its size in memory and time).
    corpus_follow_symlinks: bool = False
    # Files with more than one hard link are skipped unless allowed: a hard link to a file
    # outside the folder cannot be told from a file inside it.
    corpus_allow_hardlinks: bool = False
    corpus_max_file_bytes: int = Field(default=20_000_000, ge=1)
    corpus_max_html_bytes: int = Field(default=2_000_000, ge=1)

    # -- what a page read yields (core/search/web.py and friends) -------------------------------
    max_page_bytes: int = 3_000_000  # larger pages are refused, not parsed
    max_source_chars: int = 60_000  # extracted text beyond this is trimmed
    # Hosts on this comma-separated list (`host` or `host:port`) may be fetched even when they
    # resolve to a private, loopback or link-local address: tests, intranet wikis, staging
    # mirrors. Everything else that resolves there is refused, on every redirect hop and again at
    # connect time.
    fetch_allow_hosts: str | None = None
    page_ttl_hours: float = Field(default=24.0, ge=0)  # page and search cache freshness; 0: off
    respect_robots: bool = True
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
    # SearXNG (search=searxng): the instance's root URL, and what to ask it for (comma-separated
    # engine and category names, a language code); None: the instance's own defaults.
    searxng_url: str | None = None
    searxng_engines: str | None = None
    searxng_categories: str | None = None
    searxng_language: str | None = None

    # -- how the process runs (not hashed) -----------------------------------------------------
    max_calls_per_minute: int | None = Field(default=None, ge=1, exclude=True)  # per provider
    # Tokens asked of a provider per minute (a call's input estimate and output cap), None: no cap.
    max_tokens_per_minute: int | None = Field(default=None, ge=1, exclude=True)
    # With a Prefect server in use, both caps and a rate limit's pause are held by the server for
    # every process (tasks/shared_pacing.py); False keeps them per process.
    shared_limits: bool = Field(default=True, exclude=True)
    max_fetches_per_host: int = Field(default=2, ge=1, le=16, exclude=True)  # at once, per host
    # Price overrides: JSON text or a JSON file's path (see core.accounting.prices).
    prices: str | None = Field(default=None, exclude=True)
    # The store file: how long a write waits for another process to let go of it, and how
    # long an idle connection stays open for the next write (0: one connection per write).
    store_lock_timeout: float = Field(default=30.0, ge=0, exclude=True)
    store_hold_seconds: float = Field(default=0.5, ge=0, exclude=True)
    # Where a new DuckLake keeps its Parquet files (a folder every writer mounts at the same
    # path; the catalog remembers it).
    lake_data_path: str | None = Field(default=None, exclude=True)
    # How old a recorded answer of a billed call may be when a repeat is served it
    # (core.accounting.memo; retries and reruns of the same edition); 0: the memo is off. Whether
    # a repeat is served, not what is asked: a memo's answer is the request's own.
    memo_ttl_hours: float = Field(default=24.0, ge=0, exclude=True)


class Settings(BaseSettings, RunFields):
    """Everything that configures a run: `RunFields`, and what `run_config` resolves or the flows
    read themselves (FLOW_SETTINGS)."""

    model_config = SettingsConfigDict(env_prefix="RESEARCHFLOW_", env_file=".env",
                                      extra="ignore", populate_by_name=True)

    db_path: Path = Path("researchflow.duckdb")
    # Past one machine. `store`: a DuckLake target ("ducklake:postgres:dbname=rf host=db
    # user=rf", no password: libpq reads PGPASSWORD or ~/.pgpass) that many processes and
    # machines write at once, instead of the file at db_path (one writing process); a db_path
    # written "ducklake:..." names a lake too (its Parquet files: `lake_data_path`).
    store: str | None = Field(default=None, pattern=r"^ducklake:")
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
    # condense may go to a cheaper model of the same provider (`role_models`).
    model_plan: str | None = None
    model_research: str | None = None  # chooses follow-up queries
    model_condense: str | None = None
    model_compress: str | None = None
    model_report: str | None = None
    search: str = "auto"  # "auto" | "serpapi" | "searxng" | "corpus"

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

    # Context windows: overrides by model prefix (the default: `default_context_window`).
    context_windows: dict[str, int] = Field(default_factory=dict)

    max_topic_concurrency: int = Field(default=2, ge=1, le=16)
    max_subquestion_workers: int = Field(default=4, ge=1, le=32)
    # `batch`: rows a CSV may hold, good or bad (checked before Prefect starts).
    max_csv_rows: int = Field(default=10_000, ge=1)
    # `researchflow mcp`: topics its clients may have under way at once on this machine
    # (running or waiting for one of max_topic_concurrency slots); more are refused, "busy".
    mcp_max_queued: int = Field(default=8, ge=1, le=256)
    # Spending: caps in USD (None: no cap); pacing and prices are RunFields.
    max_cost_usd: float | None = Field(default=None, gt=0)  # per topic
    max_batch_cost_usd: float | None = Field(default=None, gt=0)
    # Seconds before a provider call's first retry; each further retry waits twice as long
    # (2, 4, 8, 16, 32 s, each +-50% jitter), and at least what the provider's retry-after
    # names. 0: retry at once (the test suite). Read once per process, when tasks/retry.py
    # builds the tasks' retry options (Prefect fixes a task's delays when it is defined).
    retry_backoff: float = Field(default=2.0, ge=0)
    # `export --format pdf`: the TrueType font (.ttf/.ttc) to set PDFs in; None: the first
    # Unicode font Debian packages install (core.reports.export_pdf.find_font).
    pdf_font: str | None = None

    @field_validator("store", mode="before")
    @classmethod
    def _blank_store_is_unset(cls, value: Any) -> Any:
        # `RESEARCHFLOW_STORE=` (exported empty to switch the lake off) means no lake.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("db_path", mode="before")
    @classmethod
    def _db_path_as_typed(cls, value: Any) -> Any:
        # As with --db: only "ducklake:..." as written is a lake. Path() drops a leading "./",
        # which would turn the file "./ducklake:dir/x.duckdb" into a lake; made absolute, it
        # stays a file.
        if isinstance(value, str) and not value.startswith("ducklake:") \
                and str(Path(value)).startswith("ducklake:"):
            return Path(value).expanduser().resolve()
        return value

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # A .env may not send a key from the environment elsewhere (core.envfile).
        dotenv = DotEnvRules(settings_cls, dotenv_settings, init_settings, env_settings)
        return init_settings, env_settings, dotenv, file_secret_settings

    def model_post_init(self, context: Any, /) -> None:
        # Every key loaded is masked by value from now on, wherever text leaves the process.
        for value in self.__dict__.values():
            if isinstance(value, SecretStr):
                secrets.remember(value.get_secret_value())
        for name in secrets.ENVIRONMENT_SECRETS:
            secrets.remember(os.environ.get(name))
        for target in (self.store, str(self.db_path)):  # refused where used; masked meanwhile
            secrets.remember(secrets.target_password(target or ""))

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

    def role_models(self, cheaper: Callable[[str], str] | None = None) -> dict[str, str]:
        """The model of every role that differs from `resolved_model()` (role -> spec).

        Roles: plan, queries (RESEARCHFLOW_MODEL_RESEARCH), condense, compress, report. The
        offline engine has no roles to split. With `model` on auto and no condense model set,
        condense goes to `cheaper(model)`: the caller's price ladder (core.llm.siblings.cheaper),
        resolved where the settings become a RunConfig; without one, to the model itself.
        """
        base = self.resolved_model()
        if base == "offline":
            return {}
        chosen = {"plan": self.model_plan, "queries": self.model_research,
                  "condense": self.model_condense, "compress": self.model_compress,
                  "report": self.model_report}
        if chosen["condense"] is None and self.model == "auto" and cheaper is not None:
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
        if self.serpapi_api_key:
            return "serpapi"
        return "searxng" if self.searxng_url else "corpus"

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


def settings_error(exc: ValidationError) -> str:
    """A Settings ValidationError as one line naming each variable to fix, never its value
    when it may be a secret."""
    parts = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error.get("loc") else "?"
        name = f"RESEARCHFLOW_{field.upper()}"
        if field == "store":
            parts.append(f"{name} names a DuckLake and must start with 'ducklake:' "
                         "(ducklake:postgres:dbname=NAME host=HOST user=USER); unset it to use "
                         "a DuckDB file (--db or RESEARCHFLOW_DB_PATH)")
        else:
            parts.append(f"{name}: {error['msg']}")
    return "; ".join(parts)


def api_key(prefix: str) -> SecretStr | None:
    """A provider's key (settings prefix: openai, anthropic, gemini, serpapi), read where a client
    is built: the first of its variables (those `Settings` reads it from) set in the environment,
    else in the working directory's `.env`. Only those variables are read: no `Settings` is
    loaded, so nothing else the environment holds can fail a provider's call. The one setting
    that never travels in a RunConfig."""
    alias = Settings.model_fields[f"{prefix}_api_key"].validation_alias
    names = [str(name) for name in getattr(alias, "choices", ())]
    found = next((os.environ[n] for n in names if os.environ.get(n)), None)
    if found is None and Path(".env").is_file():
        dotenv = dotenv_values(".env")
        found = next((dotenv[n] for n in names if dotenv.get(n)), None)
    if not found:
        return None
    secrets.remember(found)  # masked wherever text leaves, in a process that loaded no Settings
    return SecretStr(found)


class EnvironmentKeys:
    """Where a run's clients find their keys, asked where each client is built: the environment
    (`api_key`). A run's context may be handed another reader (tasks/secret_blocks.py: a Prefect
    Secret block when the environment has none), which `elsewhere` names in a missing key's
    hint."""

    def read(self, prefix: str) -> SecretStr | None:
        return api_key(prefix)

    def elsewhere(self, prefix: str) -> str:
        """Where else this reader looked for `prefix`'s key, for a hint ("" for nowhere)."""
        return ""


class RunConfig(RunFields):
    """Everything a task builds from: the only input to engines, searches, stores and limits.

    Flows make it from `Settings` once (`run_config`), tasks receive it as an input, and the run
    context (core.context) builds every client from it and from nothing else, so what a task
    does is a function of its inputs and Prefect's cache key (which hashes this object) covers
    every setting that changes a request or a result. It is hashable and secret-free: keys stay
    in the environment and are read where a client is built (`api_key`).

    Besides `RunFields` (copied from the settings under their own names), it holds what
    `run_config` resolves: the model and search chosen, the model of each role, paths made
    absolute, the window overrides and the servers named.
    """

    model_config = ConfigDict(frozen=True)

    model: str = "offline"
    role_models: tuple[tuple[str, str], ...] = ()  # (role, spec) where a role differs
    search: str = "corpus"
    corpus_dir: str | None = None
    cache_dir: str
    db_path: str  # the store target: a file's resolved path, or "ducklake:..." (store_target)
    context_windows: tuple[tuple[str, int], ...] = ()
    # Servers (never keys): a different server is a different answer.
    base_urls: tuple[tuple[str, str], ...] = ()  # (settings prefix, URL), e.g. ("openai", ...)
    # Set by a refreshing run (its root flow-run id): part of every task's inputs, so cached
    # calls are not reused, while a retry of that same run still reuses its own.
    refresh: str = ""

    @property
    def billed(self) -> bool:
        """Whether any step calls a remote service (an LLM provider, SerpAPI or SearXNG): then
        each step is its own task run, retried and cached on its own."""
        return self.model != "offline" or self.search in ("serpapi", "searxng")

    def base_url(self, prefix: str) -> str | None:
        """The configured server for a provider's settings prefix (openai, anthropic, ...)."""
        return dict(self.base_urls).get(prefix)


# Settings a flow reads itself instead of handing them to tasks: who pays (budgets live in the
# ledger's scope), how many run at once, where tasks run, and the inputs run_config() resolves
# (keys never travel; model, search, corpus and store arrive resolved).
FLOW_SETTINGS = frozenset({
    "max_cost_usd", "max_batch_cost_usd", "max_topic_concurrency", "max_subquestion_workers",
    "task_runner", "dask_address", "openai_api_key", "anthropic_api_key", "gemini_api_key",
    "serpapi_api_key", "model_plan", "model_research", "model_condense", "model_compress",
    "model_report", "store", "openai_base_url", "anthropic_base_url", "gemini_base_url",
    "serpapi_base_url",
    "pdf_font",  # read by `export`, which no task runs
    "retry_backoff",  # fixed when tasks/retry.py defines the tasks, not a task input
    "max_csv_rows",  # checked by `batch` before Prefect starts
    "mcp_max_queued",  # the MCP server's own queue
})
_BASE_URLS = ("openai", "anthropic", "gemini", "serpapi")


def run_config(settings: Settings, *, cheaper: Callable[[str], str] | None = None) -> RunConfig:
    """The RunConfig of these settings: the one conversion from configuration to task input.
    `cheaper` is the price ladder a model on auto condenses with (`Settings.role_models`)."""
    urls = tuple((prefix, url) for prefix in _BASE_URLS
                 if (url := getattr(settings, f"{prefix}_base_url", None)))
    return RunConfig(
        **{name: getattr(settings, name) for name in RunFields.model_fields},
        model=settings.resolved_model(),
        role_models=tuple(sorted(settings.role_models(cheaper).items())),
        search=settings.resolved_search(),
        corpus_dir=str(settings.corpus_dir.resolve()) if settings.corpus_dir else None,
        cache_dir=str(settings.cache_dir), db_path=settings.store_target(),
        context_windows=tuple(sorted(settings.context_windows.items())), base_urls=urls)
