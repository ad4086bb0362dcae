"""Structured output on OpenAI-compatible servers, through the real openai SDK on loopback.

json_schema is asked for first; a 400 refusing it (worded as vLLM, Ollama, LM Studio, Groq and
DeepSeek word it, in their own body shapes) moves that model to json_object, a refusal of that to
the schema as an instruction, and the next call starts from what was learned. RESEARCHFLOW_JSON_MODE
fixes the mode. Every assertion reads what the server was sent or what came back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.llm.quirks import fix_for
from core.llm.registry import make_model
from core.models import Message
from core.settings import Settings, run_config
from core.signals import Fatal
from tests.contract.llm_wire import SCHEMA, bodies, make, raised
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer

ASK = [Message(role="user", content="Answer in JSON.")]
ANSWER = '{"answer": "yes"}'


def _openai_shape(message: str, **fields: Any) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None,
                      "code": None, **fields}}


def _vllm_shape(message: str) -> dict[str, Any]:  # vLLM's ErrorResponse: flat, code = status
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None,
            "code": 400}


# Refusals of json_schema, as servers word them and in their body shapes.
SCHEMA_REFUSALS = [
    pytest.param(_vllm_shape("response_format json_schema is not supported"), id="vllm"),
    pytest.param(_openai_shape("'response_format.type' must be 'json_object' or 'text'"),
                 id="must-be-json-object"),
    pytest.param(_openai_shape("Invalid value: 'json_schema'. Supported values are: "
                               "'json_object' and 'text'.", param="response_format.type",
                               code="invalid_value"), id="groq-invalid-value"),
    pytest.param(_openai_shape("This response_format type is unavailable now"),
                 id="unavailable-now"),
    pytest.param({"error": "json_schema response_format is not supported by this model"},
                 id="string-error"),
    # llama.cpp's own check, as its server-common.cpp words it (builds before json_schema)
    pytest.param({"error": {"code": 400, "message": 'response_format type must be one of "text" '
                            'or "json_object", but got: json_schema',
                            "type": "invalid_request_error"}}, id="llama-cpp-older"),
]


def _settings() -> Settings:  # building a RunConfig touches no file
    return Settings(_env_file=None, cache_dir="/tmp/rf-json", db_path="/tmp/rf-json.duckdb")


def _instruction_sent(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    return last["role"] == "system" and json.dumps(SCHEMA) in last["content"]


@pytest.mark.parametrize("refusal", SCHEMA_REFUSALS)
def test_a_refused_json_schema_moves_the_model_to_json_object(server: ScriptedServer,
                                                               refusal: dict[str, Any]) -> None:
    server.push(Reply(400, refusal), fake.success_reply("openai", ANSWER),
                fake.success_reply("openai", ANSWER))
    model = make("openai-compatible:smollm2", server.url)

    first = model.complete(ASK, max_tokens=50, json_schema=SCHEMA)
    second = model.complete(ASK, max_tokens=50, json_schema=SCHEMA)

    assert json.loads(first.text) == json.loads(second.text) == {"answer": "yes"}
    refused, retried, direct = bodies(server)
    assert refused["response_format"]["type"] == "json_schema"
    assert refused["response_format"]["json_schema"]["schema"] == SCHEMA
    assert not _instruction_sent(refused)
    for body in (retried, direct):  # JSON mode, the schema in words beside it
        assert body["response_format"] == {"type": "json_object"}
        assert _instruction_sent(body)
    assert len(server.requests) == 3  # the second call went out in the learned mode at once
    assert model.form().json_mode == "json_object"


def test_a_server_refusing_both_gets_the_schema_as_an_instruction(
        server: ScriptedServer) -> None:
    server.push(Reply(400, _vllm_shape("response_format json_schema is not supported")),
                # LM Studio's wording names json_schema as the accepted one: what was SENT decides
                Reply(400, {"error": "'response_format.type' must be 'json_schema' or 'text'"}),
                fake.success_reply("openai", ANSWER), fake.success_reply("openai", ANSWER))
    model = make("openai-compatible:smollm2", server.url)

    model.complete(ASK, max_tokens=50, json_schema=SCHEMA)
    model.complete(ASK, max_tokens=50, json_schema=SCHEMA)

    sent = bodies(server)
    assert [b.get("response_format", {}).get("type") for b in sent] == [
        "json_schema", "json_object", None, None]
    assert all(_instruction_sent(b) for b in sent[1:])
    # another model on the same server is still asked for json_schema first
    server.push(fake.success_reply("openai", ANSWER))
    make("openai-compatible:qwen2.5", server.url).complete(ASK, max_tokens=50, json_schema=SCHEMA)
    assert bodies(server)[-1]["response_format"]["type"] == "json_schema"


def test_a_plain_call_is_untouched_by_the_json_mode(server: ScriptedServer) -> None:
    server.push(Reply(400, _vllm_shape("response_format json_schema is not supported")),
                fake.success_reply("openai", ANSWER), fake.success_reply("openai", "prose"))
    model = make("openai-compatible:smollm2", server.url)
    model.complete(ASK, max_tokens=50, json_schema=SCHEMA)
    model.complete(ASK, max_tokens=50)  # markdown: no response_format, no instruction
    last = bodies(server)[-1]
    assert "response_format" not in last and not _instruction_sent(last)


def test_an_unrelated_400_teaches_nothing(server: ScriptedServer) -> None:
    server.push(Reply(400, _vllm_shape("messages: Field required")))
    model = make("openai-compatible:smollm2", server.url)
    exc = raised(lambda: model.complete(ASK, max_tokens=50, json_schema=SCHEMA))
    assert isinstance(exc, Fatal) and exc.reason == "bad_request"
    assert len(server.requests) == 1
    assert model.form().json_mode is None


@pytest.mark.parametrize("mode, response_format, instruction", [
    ("json_object", {"type": "json_object"}, True), ("instruction", None, True)])
def test_the_setting_fixes_the_mode(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
                                    mode: str, response_format: dict | None,
                                    instruction: bool) -> None:
    monkeypatch.setenv("RESEARCHFLOW_JSON_MODE", mode)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    config = run_config(_settings())
    assert config.json_mode == mode  # in the RunConfig, so in the tasks' cache key
    server.push(fake.success_reply("openai", ANSWER))
    make_model("openai-compatible:smollm2", config).complete(ASK, max_tokens=50,
                                                             json_schema=SCHEMA)
    body = bodies(server)[0]
    assert body.get("response_format") == response_format
    assert _instruction_sent(body) is instruction


def test_a_fixed_json_schema_is_not_stepped_down(server: ScriptedServer) -> None:
    server.push(Reply(400, _vllm_shape("response_format json_schema is not supported")))
    model = make("openai-compatible:smollm2", server.url, settings={"json_mode": "json_schema"})
    exc = raised(lambda: model.complete(ASK, max_tokens=50, json_schema=SCHEMA))
    assert isinstance(exc, Fatal) and "json_schema" in str(exc)  # the user's choice, refused
    assert len(server.requests) == 1


def test_the_json_mode_is_part_of_the_run_config_key() -> None:
    base = _settings()
    auto = run_config(base)
    fixed = run_config(base.model_copy(update={"json_mode": "instruction"}))
    assert auto.json_mode == "auto" and fixed.json_mode == "instruction"
    assert auto.model_dump_json() != fixed.model_dump_json()  # what Prefect hashes
    with pytest.raises(ValueError):
        Settings(_env_file=None, json_mode="yaml")


class _Refused(Exception):
    def __init__(self, body: Any) -> None:
        super().__init__(str(body))
        self.status_code, self.body = 400, body


@pytest.mark.parametrize("sent, fix", [
    ({"response_format": {"type": "json_schema"}}, "json_object"),
    ({"response_format": {"type": "json_object"}}, "json_instruction"),
    ({}, None),  # an instruction was sent: nothing lower to step down to
])
def test_the_mode_refused_is_read_from_what_was_sent(sent: dict[str, Any],
                                                     fix: str | None) -> None:
    exc = _Refused(_openai_shape("response_format is not supported"))
    assert fix_for(exc, sent) == fix
