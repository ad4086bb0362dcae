"""One configuration path: every setting that changes a request or a result reaches tasks in
their RunConfig, and so in Prefect's cache key; settings of how the process runs do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefect.cache_policies import INPUTS

from core.models import TopicOptions
from core.settings import FLOW_SETTINGS, RunConfig, Settings, run_config
from flows.topic import research_topic
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import ResearchProvider, write_pages

# A value for each request-shaping setting that differs from its default.
CHANGED = {
    "model": "openai:gpt-4o", "search": "serpapi", "corpus_dir": "/tmp/other-corpus",
    "cache_dir": "/tmp/other-cache", "db_path": "/tmp/other.duckdb", "results_per_query": 7,
    "max_output_tokens": 999, "default_context_window": 32_000,
    "context_windows": {"my-model": 8192}, "reasoning_effort": "high", "thinking_budget": 2048,
    "request_timeout": 5.0, "openai_base_url": "http://127.0.0.1:9/v1",
    "anthropic_base_url": "http://127.0.0.1:9", "gemini_base_url": "http://127.0.0.1:9",
    "serpapi_base_url": "http://127.0.0.1:9", "max_page_bytes": 1000, "max_source_chars": 500,
    "page_ttl_hours": 1.0, "fetch_allow_hosts": "wiki.corp", "respect_robots": False,
    "fetch_connect_timeout": 1.0, "fetch_read_timeout": 1.0, "page_deadline": 3.0,
    "max_redirects": 1, "serpapi_engine": "bing", "serpapi_location": "Berlin",
    "serpapi_language": "de", "serpapi_country": "de", "model_condense": "openai:gpt-4.1-nano",
    "corpus_follow_symlinks": True, "corpus_allow_hardlinks": True,
    "corpus_max_file_bytes": 1000, "corpus_max_html_bytes": 1000,
    "searxng_url": "http://127.0.0.1:9", "searxng_engines": "wikipedia",
    "searxng_categories": "science", "searxng_language": "de",
    "json_mode": "json_object", "fallback": "none",
}
# RunConfig fields that hold several settings, or none (a refreshing run's salt, set by a flow).
GATHERED = {"role_models": "model_condense", "base_urls": "openai_base_url", "refresh": None}
# How the process runs: never a reason to pay for a cached call again.
OPERATIONAL = {"max_calls_per_minute": 10, "max_tokens_per_minute": 9000, "shared_limits": False,
               "max_fetches_per_host": 5, "prices": '{"m": {}}',
               "store_lock_timeout": 1.0, "store_hold_seconds": 0.0, "lake_data_path": "/x",
               # the call memo's expiry says which repeats are served, not what is asked
               "memo_ttl_hours": 2.0}


def key(settings: Settings) -> str:
    return INPUTS.compute_key(task_ctx=None, inputs={"config": run_config(settings)},
                              flow_parameters={})


def base(**changes) -> Settings:
    fields = dict(model="openai:gpt-4o-mini", search="corpus", cache_dir=Path("/tmp/cache"),
                  db_path=Path("/tmp/s.duckdb"))
    return Settings(_env_file=None, **(fields | changes))


def test_every_setting_is_either_in_the_run_config_or_read_by_the_flows() -> None:
    in_config = set(RunConfig.model_fields) | {f"{p}_base_url" for p in
                                               ("openai", "anthropic", "gemini", "serpapi")}
    undecided = set(Settings.model_fields) - in_config - FLOW_SETTINGS
    assert not undecided, f"settings that neither key the cache nor are flow settings: {undecided}"


def test_every_hashed_field_is_changed_by_a_test_and_every_unhashed_one_is_operational() -> None:
    """A field added to RunConfig later must be added here too, so its key is checked."""
    for name, field in RunConfig.model_fields.items():
        if field.exclude:
            assert name in OPERATIONAL, f"{name} is left out of the cache key: add it to OPERATIONAL"
        elif name in GATHERED:
            assert GATHERED[name] is None or GATHERED[name] in CHANGED
        else:
            assert name in CHANGED, f"{name} keys the cache: give it a changed value in CHANGED"


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_a_request_shaping_setting_changes_the_cache_key(name: str) -> None:
    value = CHANGED[name]
    if name.endswith("_dir") or name == "db_path":
        value = Path(value)
    assert key(base(**{name: value})) != key(base())


@pytest.mark.parametrize("name", sorted(OPERATIONAL))
def test_how_the_process_runs_does_not_change_the_cache_key(name: str) -> None:
    assert key(base(**{name: OPERATIONAL[name]})) == key(base())
    assert getattr(run_config(base(**{name: OPERATIONAL[name]})), name) == OPERATIONAL[name]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_changed_setting_between_two_runs_makes_new_provider_calls(monkeypatch, tmp_path):
    """Measured from outside before the fix: the second run, at high effort, made 0 calls and
    got every answer asked at low effort from the cache."""
    corpus = write_pages(tmp_path / "corpus", ["memory", "blocking"])
    provider = ResearchProvider("openai")
    with ScriptedServer(default=provider) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-effort")
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url + "/v1")
        made = []
        for effort in ("low", "high", "high"):
            monkeypatch.setenv("RESEARCHFLOW_REASONING_EFFORT", effort)
            before = len(srv.requests)
            state = research_topic(topic="How do threading and asyncio differ in waiting?",
                                   batch_id="effort",
                                   options=TopicOptions(max_subquestions=2, max_rounds=1,
                                                        max_waves=1), model="openai:gpt-5.4-mini",
                                   corpus_dir=str(corpus), db_path=str(tmp_path / "s.duckdb"),
                                   return_state=True)
            assert state.is_completed(), state.message
            sent = {json.loads(r.body).get("reasoning_effort") for r in srv.requests[before:]}
            made.append((len(srv.requests) - before, sent))
    assert made[0][0] > 0 and made[0][1] == {"low"}
    assert made[1][0] == made[0][0] and made[1][1] == {"high"}  # every call asked again
    assert made[2][0] == 0  # the same settings again: all from the cache
