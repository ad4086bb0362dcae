"""What the reasoning and long-output contract tests share: a model of any provider pointed at
a loopback fake, what it was sent, and the signal a call raised (test_models.py uses `raised`)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from core.llm.base import SDKBackend
from core.llm.registry import make_model
from core.models import Message
from core.signals import Signal
from core.settings import Settings
from tests.fakes.http import ScriptedServer

API_KEY = "sk-reasoning-test-0123456789abcdef"
PROMPT = [Message(role="system", content="Be brief."), Message(role="user", content="Why?")]
SCHEMA = {"title": "Answer", "type": "object", "properties": {"answer": {"type": "string"}},
          "required": ["answer"]}
SUFFIX = {"openai": "/v1", "anthropic": "", "gemini": ""}
# google-genai lets transport errors (timeouts) through as httpx2's own exceptions.
SDK_MODULES = {"openai": ("openai",), "anthropic": ("anthropic",),
               "gemini": ("google.genai", "httpx2")}


def make(spec: str, url: str, *, settings: dict[str, Any] | None = None,
         **options: Any) -> SDKBackend:
    provider = spec.split(":", 1)[0]
    base = url + SUFFIX.get(provider, "/v1")
    s = Settings(_env_file=None, request_timeout=10, openai_api_key=API_KEY,
                 anthropic_api_key=API_KEY, gemini_api_key=API_KEY, openai_base_url=base,
                 anthropic_base_url=base, gemini_base_url=base, **(settings or {}))
    model = make_model(spec, s, **options)
    assert isinstance(model, SDKBackend)
    return model


def bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests]


def gen_config(body: dict[str, Any]) -> dict[str, Any]:
    return body.get("generationConfig") or {}


def thinking_budget_sent(body: dict[str, Any]) -> int | None:
    """generationConfig.thinkingConfig's budget. google-genai sends the nested keys in snake
    case ("thinking_budget"), which the API's proto-JSON parser accepts beside camel case."""
    config = gen_config(body).get("thinkingConfig")
    if config is None:
        return None
    return config.get("thinkingBudget", config.get("thinking_budget"))


def expect(exc: BaseException, cls: type[Signal], wire: str) -> Signal:
    assert isinstance(exc, cls), f"expected {cls.__name__}, got {exc!r}"
    assert type(exc.__cause__).__module__.startswith(SDK_MODULES[wire]), exc.__cause__
    return exc


def raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test inspects whatever came out
        return exc
    pytest.fail("the call did not raise")


