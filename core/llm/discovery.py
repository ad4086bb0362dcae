"""A model's context window, asked of the OpenAI-compatible server that serves it.

Local servers know the window they run with, and it is rarely the model's training context
(llama-server `-c 2048` on a model trained for 8192). `discover_window(base_url, model)` asks,
each request with a short timeout, and returns the first answer of:

- `GET {base}/models`: llama.cpp `data[].meta.n_ctx` (not `n_ctx_train`, the training context),
  vLLM `data[].max_model_len`, routers' `context_length` / `context_window`;
- `GET {root}/props`: llama.cpp `default_generation_settings.n_ctx` (per slot);
- `GET {root}/api/v0/models`: LM Studio `loaded_context_length`, else `max_context_length`;
- `GET {root}/api/ps`: Ollama's `context_length` of the loaded model (what it runs with);
- `POST {root}/api/show {"model": name}`: Ollama `num_ctx` in `parameters`, else
  `model_info["<arch>.context_length"]`.

`root` is the base URL without its trailing `/v1`. A list names the model by id (a single-model
server such as llama.cpp answers any name, so its one entry counts). The user's key goes as a
Bearer token to that same server only (redirects are not followed) and is never logged. A
server that says nothing, errors or times out gives None: the caller keeps its default. It
does not decide when to ask (a run's context asks once, for a model whose window it does not
know: core.context) nor remember the answer (core.overflow.windows).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import SecretStr

log = logging.getLogger("researchflow.llm")

TIMEOUT = 2.0  # seconds per request: a local server answers at once, a remote one is not waited on
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.M)


@dataclass(frozen=True)
class Window:
    tokens: int
    source: str  # where it was read, for the log: "the server's /props"


def discover_window(base_url: str, model: str, *, api_key: SecretStr | None = None,
                    timeout: float = TIMEOUT) -> Window | None:
    """The window the server at `base_url` (its /v1 URL) runs `model` with, or None when it
    does not say."""
    return _ask(base_url.rstrip("/"), model, api_key, timeout)


def server_root(base_url: str) -> str:
    """The server's own root: the base URL without a trailing /v1 ("http://h:8080/v1" ->
    "http://h:8080")."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _ask(base: str, model: str, api_key: SecretStr | None, timeout: float) -> Window | None:
    root = server_root(base)
    probes: list[tuple[str, str, dict[str, Any] | None, Callable[[Any, str], int | None]]] = [
        ("GET", f"{base}/models", None, _from_openai_models),
        ("GET", f"{root}/props", None, _from_llama_props),
        ("GET", f"{root}/api/v0/models", None, _from_lmstudio_models),
        ("GET", f"{root}/api/ps", None, _from_ollama_ps),
        ("POST", f"{root}/api/show", {"model": model}, _from_ollama_show),
    ]
    headers = {"Authorization": f"Bearer {api_key.get_secret_value()}"} if api_key else {}
    with httpx.Client(timeout=timeout, headers=headers, follow_redirects=False) as client:
        for method, url, body, read in probes:
            try:
                reply = client.request(method, url, json=body)
            except httpx.HTTPError as exc:  # down or hanging: the other paths will not answer
                log.debug("no context window from %s: %s", _shown(url), type(exc).__name__)
                return None
            if reply.status_code != 200:
                continue
            try:
                tokens = read(reply.json(), model)
            except ValueError:  # not JSON
                continue
            if tokens is not None:
                return Window(tokens, f"the server's {urlsplit(url).path}")
    log.debug("the server at %s does not say the context window of %r", _shown(base), model)
    return None


def _shown(url: str) -> str:
    """The URL without any user:password part, for a log line."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


def _tokens(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _first(*values: Any) -> int | None:
    for value in values:
        if (tokens := _tokens(value)) is not None:
            return tokens
    return None


def _same_model(entry: dict[str, Any], model: str) -> bool:
    wanted = model.strip().lower()
    names = [entry.get(k) for k in ("id", "name", "model")] + list(entry.get("aliases") or [])
    for name in names:
        if not isinstance(name, str):
            continue
        name = name.strip().lower()
        stem = re.sub(r"\.gguf$", "", name.rsplit("/", 1)[-1])
        if wanted in (name, stem) or name == f"{wanted}:latest":
            return True
    return False


def _entry(entries: Any, model: str) -> dict[str, Any] | None:
    """The entry naming the model, or the only entry of a single-model server."""
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    named = [e for e in entries if _same_model(e, model)]
    if named:
        return named[0]
    return entries[0] if len(entries) == 1 else None


def _from_openai_models(body: Any, model: str) -> int | None:
    entry = _entry(body.get("data") if isinstance(body, dict) else None, model)
    if entry is None:
        return None
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    return _first(meta.get("n_ctx"), entry.get("max_model_len"), entry.get("context_length"),
                  entry.get("context_window"))


def _from_llama_props(body: Any, model: str) -> int | None:
    settings = body.get("default_generation_settings") if isinstance(body, dict) else None
    return _first(settings.get("n_ctx")) if isinstance(settings, dict) else None


def _from_lmstudio_models(body: Any, model: str) -> int | None:
    entry = _entry(body.get("data") if isinstance(body, dict) else None, model)
    if entry is None:
        return None
    return _first(entry.get("loaded_context_length"), entry.get("max_context_length"))


def _from_ollama_ps(body: Any, model: str) -> int | None:
    entries = body.get("models") if isinstance(body, dict) else None
    named = [e for e in entries or [] if isinstance(e, dict) and _same_model(e, model)]
    return _first(named[0].get("context_length")) if named else None  # loaded: what it runs


def _from_ollama_show(body: Any, model: str) -> int | None:
    if not isinstance(body, dict):
        return None
    parameters = body.get("parameters")
    if isinstance(parameters, str) and (m := _NUM_CTX.search(parameters)):
        return _tokens(int(m.group(1)))
    info = body.get("model_info")
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    return _first(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
