"""The context window, asked of the compatible server itself (core.llm.discovery), on loopback.

Each fake speaks one server's shape as that server answers it: llama.cpp (`/v1/models` meta and
`/props`, bodies trimmed from a real llama-server), vLLM (`max_model_len`), Ollama (`/api/ps`,
`/api/show`) and LM Studio (`/api/v0/models`). Then a server that 404s everything, one that hangs,
and the run context's hook: the engine of an unknown model learns the window before its first
call and the "No context window known" warning never appears; the key reaches that server only,
and no log line holds it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import SecretStr

from core.context import build
from core.llm import discovery
from core.llm.discovery import discover_window, server_root
from core.settings import Settings, run_config
from tests.fakes.http import Recorded, Reply, ScriptedServer

KEY = "sk-local-window-test-0123456789"
MODEL_PATH = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"

# A real llama-server (-c 2048) answers these (trimmed; the model id is the file's path).
LLAMA_MODELS = {"object": "list", "data": [{
    "id": MODEL_PATH, "aliases": [MODEL_PATH], "object": "model", "owned_by": "llamacpp",
    "meta": {"vocab_type": 2, "n_vocab": 49152, "n_ctx": 2048, "n_ctx_train": 8192,
             "n_embd": 576, "n_params": 134515008, "ftype": "Q4_1"}}]}
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 2048, "params": {"n_predict": -1}},
               "total_slots": 4, "model_alias": MODEL_PATH, "model_path": MODEL_PATH}
VLLM_MODELS = {"object": "list", "data": [{
    "id": "Qwen/Qwen2.5-1.5B-Instruct", "object": "model", "owned_by": "vllm",
    "root": "Qwen/Qwen2.5-1.5B-Instruct", "parent": None, "max_model_len": 32768}]}
OLLAMA_OPENAI_MODELS = {"object": "list", "data": [
    {"id": "llama3.1:8b", "object": "model", "owned_by": "library"},
    {"id": "qwen2.5:0.5b", "object": "model", "owned_by": "library"}]}
OLLAMA_SHOW = {"parameters": 'num_ctx                        8192\nstop                           '
                             '"<|eot_id|>"',
               "model_info": {"general.architecture": "llama", "llama.context_length": 131072}}
LMSTUDIO_V0 = {"object": "list", "data": [
    {"id": "qwen2.5-7b-instruct", "type": "llm", "state": "loaded", "max_context_length": 32768,
     "loaded_context_length": 4096},
    {"id": "llama-3.2-1b-instruct", "type": "llm", "state": "not-loaded",
     "max_context_length": 131072}]}
LMSTUDIO_OPENAI_MODELS = {"object": "list", "data": [
    {"id": "qwen2.5-7b-instruct", "object": "model", "owned_by": "organization_owner"}]}
NOT_FOUND = Reply(404, {"error": {"code": 404, "message": "File Not Found",
                                  "type": "not_found_error"}})


def routes(table: dict[str, Any]) -> Callable[[Recorded], Reply]:
    """A server answering "METHOD /path" from `table` (a body or a Reply), 404 otherwise."""
    def handle(request: Recorded) -> Reply:
        found = table.get(f"{request.method} {request.path}")
        if found is None:
            return NOT_FOUND
        return found if isinstance(found, Reply) else Reply(body=found)
    return handle


def _serve(server: ScriptedServer, table: dict[str, Any]) -> str:
    server.default = routes(table)
    return server.url + "/v1"


def _asked(server: ScriptedServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.requests]


# --- each server's shape -----------------------------------------------------------------------

def test_llama_cpp_window_is_the_slot_context_not_the_training_one(
        server: ScriptedServer) -> None:
    base = _serve(server, {"GET /v1/models": LLAMA_MODELS, "GET /props": LLAMA_PROPS})
    found = discover_window(base, "smollm2")  # llama.cpp serves its one model under any name
    assert found is not None and found.tokens == 2048  # n_ctx, never n_ctx_train (8192)
    assert found.source == "the server's /v1/models"
    assert _asked(server) == ["GET /v1/models"]


def test_llama_cpp_props_answer_when_the_model_list_has_no_meta(server: ScriptedServer) -> None:
    bare = {"object": "list", "data": [{"id": MODEL_PATH, "object": "model"}]}
    base = _serve(server, {"GET /v1/models": bare, "GET /props": LLAMA_PROPS})
    found = discover_window(base, "smollm2")
    assert found is not None and (found.tokens, found.source) == (2048, "the server's /props")
    assert _asked(server) == ["GET /v1/models", "GET /props"]  # /props at the root, not /v1


def test_vllm_max_model_len(server: ScriptedServer) -> None:
    base = _serve(server, {"GET /v1/models": VLLM_MODELS})
    found = discover_window(base, "Qwen/Qwen2.5-1.5B-Instruct")
    assert found is not None and found.tokens == 32768


@pytest.mark.parametrize("show, ps, tokens", [
    (OLLAMA_SHOW, {"models": []}, 8192),  # num_ctx set in the Modelfile wins
    ({**OLLAMA_SHOW, "parameters": 'stop "<|eot_id|>"'}, {"models": []}, 131072),
    (OLLAMA_SHOW, {"models": [{"name": "llama3.1:8b", "model": "llama3.1:8b",
                               "context_length": 4096}]}, 4096),  # loaded: what it runs with
])
def test_ollama_ps_then_show(server: ScriptedServer, show: dict, ps: dict, tokens: int) -> None:
    base = _serve(server, {"GET /v1/models": OLLAMA_OPENAI_MODELS, "GET /api/ps": ps,
                           "POST /api/show": show})
    found = discover_window(base, "llama3.1:8b")
    assert found is not None and found.tokens == tokens
    if tokens != 4096:
        show_request = server.requests[-1]
        assert (show_request.method, show_request.path) == ("POST", "/api/show")
        assert show_request.json() == {"model": "llama3.1:8b"}


def test_lm_studio_loaded_context_first(server: ScriptedServer) -> None:
    base = _serve(server, {"GET /v1/models": LMSTUDIO_OPENAI_MODELS,
                           "GET /api/v0/models": LMSTUDIO_V0})
    found = discover_window(base, "qwen2.5-7b-instruct")
    assert found is not None and found.tokens == 4096  # loaded_context_length, not the max
    assert discover_window(base, "llama-3.2-1b-instruct").tokens == 131072  # not loaded: max


def test_a_list_of_other_models_says_nothing(server: ScriptedServer) -> None:
    two = {"object": "list", "data": [*VLLM_MODELS["data"], {
        "id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "max_model_len": 131072}]}
    base = _serve(server, {"GET /v1/models": two})
    assert discover_window(base, "mistral-7b") is None  # never another model's window


# --- servers that do not say ---------------------------------------------------------------------

def test_a_server_that_404s_everything_gives_none(server: ScriptedServer) -> None:
    base = _serve(server, {})
    assert discover_window(base, "smollm2") is None
    assert _asked(server) == ["GET /v1/models", "GET /props", "GET /api/v0/models",
                              "GET /api/ps", "POST /api/show"]


def test_a_hanging_server_is_given_up_on_within_the_timeout(silent_url: str) -> None:
    started = time.monotonic()
    assert discover_window(silent_url + "/v1", "smollm2", timeout=0.5) is None
    assert time.monotonic() - started < 1.5  # one timeout, not one per path
    assert discovery.TIMEOUT == 2.0


def test_not_json_is_skipped(server: ScriptedServer) -> None:
    base = _serve(server, {"GET /v1/models": Reply(body="<html>hello</html>"),
                           "GET /props": LLAMA_PROPS})
    assert discover_window(base, "smollm2").tokens == 2048


def test_the_root_drops_only_a_trailing_v1() -> None:
    assert server_root("http://h:8080/v1") == "http://h:8080"
    assert server_root("http://h:8080/v1/") == "http://h:8080"
    assert server_root("https://api.example.com/openai/v1") == "https://api.example.com/openai"
    assert server_root("http://h:11434") == "http://h:11434"


# --- the key ------------------------------------------------------------------------------------

def test_the_key_goes_to_that_server_as_bearer_and_is_never_logged(
        server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base = _serve(server, {})
    discover_window(base, "smollm2", api_key=SecretStr(KEY))
    assert len(server.requests) == 5
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    assert KEY not in caplog.text
    assert all(KEY not in str(rec.args) for rec in caplog.records)


# --- the run context's hook ---------------------------------------------------------------------

def _config(tmp_path: Path, base: str, **changes: Any):
    return run_config(Settings(_env_file=None, model="openai-compatible:smollm2",
                               search="corpus", openai_base_url=base,
                               cache_dir=os.environ["RESEARCHFLOW_CACHE_DIR"],
                               db_path=tmp_path / "s.duckdb",
                               **changes))


def test_the_engine_of_an_unknown_model_learns_the_window_first(
        server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    base = _serve(server, {"GET /v1/models": {"object": "list", "data": [
        {"id": MODEL_PATH, "object": "model"}]}, "GET /props": {
        "default_generation_settings": {"n_ctx": 8192}}})
    context = build(_config(tmp_path, base))
    try:
        assert context.limits.window("smollm2") == 8192 and context.limits.known("smollm2")
    finally:
        context.close()
    assert "context window 8192 for 'smollm2' from the server's /props" in caplog.text
    assert "No context window known" not in caplog.text
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    assert KEY not in caplog.text


def test_a_silent_server_keeps_todays_default_and_warning(
        server: ScriptedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = _serve(server, {})
    context = build(_config(tmp_path, base, model_condense="openai-compatible:smollm2-small"))
    try:
        assert context.limits.window("smollm2") == 128_000
        context.engine.for_role("plan").context_window()  # nothing asks the server again
        assert len(server.requests) == 10  # once per model, when the context was built
    finally:
        context.close()
    assert "No context window known for model 'smollm2'; assuming 128000 tokens" in caplog.text


def test_a_configured_window_is_not_asked_about(server: ScriptedServer, tmp_path: Path) -> None:
    base = _serve(server, {"GET /props": LLAMA_PROPS})
    context = build(_config(tmp_path, base, context_windows={"smollm2": 4096}))
    try:
        assert context.limits.window("smollm2") == 4096
    finally:
        context.close()
    assert server.requests == []  # an override is the user's word: no request at all
