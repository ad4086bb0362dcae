"""Servers' own error templates, replayed through the real openai SDK.

The templates (tests/contract/server_templates.py) were read from each server's source where it
is open (vLLM, SGLang, Hugging Face TGI, llama.cpp server, Ollama, Xinference, LiteLLM proxy:
repository, file and commit are in each template's `source`), and for closed services (LM Studio,
OpenRouter, Azure OpenAI, Mistral, DeepSeek, Groq, Together, Fireworks and others) from their
docs and from real payloads quoted in public issues. Each is filled with realistic numbers and
served by a loopback `ScriptedServer` in that server's body shape and status; the real openai
client points at it as an OpenAI-compatible base URL, and the exception it raises goes through
`translate_errors`. The signal's category, side (what to cut: input, output, or unknown) and
numbers must be the template's. Test ids name the server first.
"""

from __future__ import annotations

import openai
import pytest

from core.signals import (ContextOverflow, Fatal, Signal, classify_payload,
                                   translate_errors)
from tests.contract.server_templates import SERVERS, TEMPLATES, Template
from tests.fakes.http import Reply, ScriptedServer

REQUIRED = {"vllm", "sglang", "tgi", "llamacpp", "ollama", "lmstudio", "xinference", "litellm",
            "openrouter", "azure", "mistral", "deepseek", "groq", "together", "fireworks"}


def served(t: Template, server: ScriptedServer) -> Signal:
    server.push(Reply(t.status, t.body, headers=dict(t.headers)))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0, timeout=5.0)
    with pytest.raises(Signal) as caught:
        with translate_errors(model="some-model"):
            client.chat.completions.create(model="some-model", max_tokens=16,
                                           messages=[{"role": "user", "content": "hello"}])
    assert isinstance(caught.value.__cause__, openai.APIStatusError)
    assert len(server.requests) == 1, "max_retries=0: one request"
    return caught.value


def expect(sig: Signal, t: Template) -> None:
    assert type(sig).__name__ == t.category, f"{t.id}: got {type(sig).__name__}: {sig}"
    for name, value in t.expect.items():
        assert getattr(sig, name) == value, \
            f"{t.id}: {name} = {getattr(sig, name)!r}, expected {value!r} ({sig})"


@pytest.mark.parametrize("t", [pytest.param(t, id=t.id) for t in TEMPLATES])
def test_template_through_the_openai_sdk(t: Template, server: ScriptedServer) -> None:
    sig = served(t, server)
    expect(sig, t)
    assert sig.status == t.status
    assert sig.model == "some-model"
    assert sig.hint, "every signal says what to do"


@pytest.mark.parametrize("t", [pytest.param(t, id=t.id) for t in TEMPLATES])
def test_template_as_a_bare_payload(t: Template) -> None:
    expect(classify_payload(t.status, t.body, headers=t.headers, sdk="openai"), t)


def test_output_side_overflows_say_how_much_room_the_prompt_leaves(server: ScriptedServer) -> None:
    t = next(t for t in TEMPLATES if t.id == "sglang-tokenizer-total-output-side")
    sig = served(t, server)
    assert isinstance(sig, ContextOverflow) and sig.side == "output"
    assert "lower max_tokens" in (sig.hint or "") and str(32768 - 30000) in (sig.hint or "")


def test_output_caps_stay_fatal_and_are_never_retried_as_overflows(server: ScriptedServer) -> None:
    for t in TEMPLATES:
        if t.expect.get("reason") == "output_cap":
            sig = classify_payload(t.status, t.body, sdk="openai")
            assert isinstance(sig, Fatal) and sig.limit_kind == "output_tokens", t.id


def test_the_data_covers_every_server_and_holds_some_out() -> None:
    assert REQUIRED <= set(SERVERS)
    for server in SERVERS:
        mine = [t for t in TEMPLATES if t.server == server]
        assert any(t.heldout for t in mine), f"{server}: nothing held out"
    assert sum(t.heldout for t in TEMPLATES) >= len(TEMPLATES) // 4
    for t in TEMPLATES:
        assert t.source.strip(), t.id
        if t.category == "ContextOverflow":
            assert "side" in t.expect, t.id
    sides = {t.expect["side"] for t in TEMPLATES if t.category == "ContextOverflow"}
    assert sides == {"input", "output", None}
    assert len({t.id for t in TEMPLATES}) == len(TEMPLATES)
