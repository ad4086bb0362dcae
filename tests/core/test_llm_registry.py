"""make_model: spec parsing, settings wiring, and the errors a user sees when something is missing."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from core.llm.anthropic import AnthropicChat
from core.llm.gemini import GeminiChat
from core.llm.openai import OpenAIChat
from core.llm.registry import BACKENDS, OpenAICompatibleChat, make_model, parse_spec
from core.models import Message
from core.settings import Settings
from core.signals import Fatal
from tests.fakes.http import ScriptedServer
from tests.fakes.providers import success_reply

ENV_VARS = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
            "GEMINI_API_KEY", "GOOGLE_API_KEY"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(f"RESEARCHFLOW_{name}", raising=False)


def settings(**kw: object) -> Settings:
    return Settings(_env_file=None, **kw)


@pytest.mark.parametrize("spec, cls, model", [
    ("openai:gpt-4o-mini", OpenAIChat, "gpt-4o-mini"),
    ("anthropic:claude-sonnet-4-5", AnthropicChat, "claude-sonnet-4-5"),
    ("gemini:gemini-2.5-flash", GeminiChat, "gemini-2.5-flash"),
    ("openai-compatible:llama3.1:8b", OpenAICompatibleChat, "llama3.1:8b"),  # Ollama-style tag
])
def test_spec_picks_the_backend_with_its_key_url_and_timeout(spec: str, cls: type,
                                                              model: str) -> None:
    s = settings(openai_api_key="k-o", anthropic_api_key="k-a", gemini_api_key="k-g",
                 openai_base_url="http://o/v1", anthropic_base_url="http://a",
                 gemini_base_url="http://g", request_timeout=12.5)
    m = make_model(spec, s)
    assert type(m) is cls and m.model == model
    assert m.timeout == 12.5
    prefix = cls.settings_prefix
    assert m.base_url == getattr(s, f"{prefix}_base_url")
    assert m.api_key.get_secret_value() == f"k-{prefix[0]}"


def test_options_reach_the_backend() -> None:
    m = make_model("openai:gpt-4o", settings(openai_api_key="k"), stream=True,
                   json_mode="instruction")
    assert m.stream is True and m.json_mode == "instruction"


def test_json_mode_is_learned_unless_configured() -> None:
    s = settings(openai_api_key="k", openai_base_url="http://x/v1")
    for spec in ("openai-compatible:m", "openai:m"):  # json_schema first on every server
        model = make_model(spec, s)
        assert model.json_mode == "auto" and model.structured_mode() == "json_schema"
    forced = make_model("openai-compatible:m", settings(openai_base_url="http://x/v1",
                                                        json_mode="json_object"))
    assert forced.json_mode == "json_object" == forced.structured_mode()


@pytest.mark.parametrize("spec", ["bogus:model", "azure:gpt-4o"])
def test_unknown_provider_lists_the_known_ones(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        make_model(spec, settings())
    for name in BACKENDS:
        assert name in str(info.value)


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", ":gpt-4o", ""])
def test_malformed_spec_is_a_value_error(spec: str) -> None:
    with pytest.raises(ValueError, match="provider:model"):
        parse_spec(spec)


@pytest.mark.parametrize("spec, env_var", [("openai:gpt-4o-mini", "OPENAI_API_KEY"),
                                           ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
                                           ("gemini:gemini-2.5-flash", "GEMINI_API_KEY")])
def test_missing_key_is_fatal_and_names_the_variable(spec: str, env_var: str) -> None:
    with pytest.raises(Fatal) as info:
        make_model(spec, settings())
    assert env_var in info.value.hint and env_var in str(info.value)


def test_empty_key_counts_as_missing() -> None:
    with pytest.raises(Fatal):
        make_model("anthropic:claude-sonnet-4-5", settings(anthropic_api_key=""))


def test_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "from-env")
    m = make_model("gemini:gemini-2.5-flash", settings())
    assert m.api_key == SecretStr("from-env")
    assert "from-env" not in repr(m)


def test_compatible_server_needs_a_base_url_not_a_key() -> None:
    with pytest.raises(Fatal) as info:
        make_model("openai-compatible:llama3", settings())
    assert "OPENAI_BASE_URL" in info.value.hint


def test_compatible_server_without_key_sends_a_placeholder() -> None:
    with ScriptedServer() as srv:
        srv.push(success_reply("openai", "hello"))
        m = make_model("openai-compatible:llama3", settings(openai_base_url=srv.url + "/v1"))
        assert m.complete([Message(role="user", content="hi")], max_tokens=5).text == "hello"
    assert srv.requests[0].headers["authorization"] == "Bearer not-needed"
    assert srv.requests[0].path == "/v1/chat/completions"
