"""A model per role: RESEARCHFLOW_MODEL_<ROLE> picks it, condense goes to a cheaper sibling by
default, `--model` sets every role at once, and each call really reaches its role's model."""

from __future__ import annotations

import pytest

from tasks import contexts
from core.engine.model_driven.routed import RoutedEngine
from core.accounting.ledger import acting_as
from core.llm.siblings import cheaper
from core.models import Source, SubQuestion, Topic
from core.overflow.roles import condense_with_shrink, plan_with_shrink
from core.settings import Settings, run_config
from core.store import query_readonly
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import ResearchProvider


@pytest.mark.parametrize("spec, sibling", [
    ("anthropic:claude-sonnet-4-5", "anthropic:claude-haiku-4-5"),
    ("anthropic:claude-sonnet-4-5-20250929", "anthropic:claude-haiku-4-5"),
    ("gemini:gemini-2.5-flash", "gemini:gemini-2.5-flash-lite"),
    ("openai:gpt-4o", "openai:gpt-4o-mini"),
    ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),  # already the cheap one
    ("openai-compatible:llama3", "openai-compatible:llama3"),
])
def test_cheaper_sibling(spec, sibling):
    assert cheaper(spec) == sibling


def test_roles_follow_the_settings(monkeypatch):
    for var in ("RESEARCHFLOW_MODEL", "RESEARCHFLOW_MODEL_CONDENSE"):
        monkeypatch.delenv(var, raising=False)
    auto = Settings(anthropic_api_key="k")
    assert auto.role_models(cheaper) == {"condense": "anthropic:claude-haiku-4-5"}
    assert auto.role_models() == {}  # no price ladder given: every role on the model
    assert Settings(anthropic_api_key="k", model="anthropic:claude-sonnet-4-5").role_models() == {}
    monkeypatch.setenv("RESEARCHFLOW_MODEL_REPORT", "anthropic:claude-opus-4-5")
    monkeypatch.setenv("RESEARCHFLOW_MODEL_RESEARCH", "anthropic:claude-haiku-4-5")
    chosen = Settings(anthropic_api_key="k", model="anthropic:claude-sonnet-4-5").role_models()
    assert chosen == {"report": "anthropic:claude-opus-4-5", "queries": "anthropic:claude-haiku-4-5"}
    assert Settings(model="offline").role_models() == {}


def test_each_role_reaches_its_own_model(monkeypatch, tmp_path):
    provider = ResearchProvider("openai")
    with ScriptedServer(default=provider) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-roles")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("RESEARCHFLOW_MODEL_CONDENSE", "openai:gpt-4.1-nano")
        monkeypatch.setenv("RESEARCHFLOW_DB_PATH", str(tmp_path / "store.duckdb"))
        contexts.close()
        config = run_config(Settings.load(model="openai:gpt-4o"))
        engine = contexts.context_for(config).engine  # each role with its extractive fallback
        assert isinstance(engine.engine, RoutedEngine)
        assert "condense: openai:gpt-4.1-nano" in engine.name
        with acting_as("plan"):
            plan_with_shrink(engine.for_role("plan"), Topic(text="Threading or asyncio?"))
        page = Source(url="https://x.test/p", title="Page",
                      text="Asyncio waits on sockets without threads at all.")
        with acting_as("condense"):
            condense_with_shrink(engine.for_role("condense"), SubQuestion(index=0, question="q?"),
                                 page)
        contexts.flush()
        sent = [r.json()["model"] for r in server.requests]
    assert sent == ["gpt-4o", "gpt-4.1-nano"]
    _, rows = query_readonly(tmp_path / "store.duckdb",
                             "SELECT role, model FROM ledger ORDER BY created_at")
    assert rows == [("plan", "gpt-4o"), ("condense", "gpt-4.1-nano")]
    contexts.close()
