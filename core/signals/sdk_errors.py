"""Which SDK raised an exception, which provider host it called, and whether it is a transport
failure (connect, timeout, bad URL) rather than a reply. Used by `core.signals.classify`;
nothing heavy is imported: exception classes are looked up only in modules already loaded.
"""

from __future__ import annotations

import sys
from typing import Iterator

_HOSTS = {"groq.com": "groq", "openrouter.ai": "openrouter", "deepseek.com": "deepseek",
          "mistral.ai": "mistral", "openai.azure.com": "azure-openai", "together": "together",
          ":11434": "ollama", "api.openai.com": "openai"}


def sdk_of(exc: BaseException) -> str | None:
    root = type(exc).__module__.split(".")[0]
    if root in ("openai", "anthropic"):
        return root
    if type(exc).__module__.startswith("google.genai"):
        return "gemini"
    return None


def provider_of(exc: BaseException, sdk: str | None) -> str | None:
    request = getattr(exc, "request", None)
    if request is None:
        try:
            request = getattr(getattr(exc, "response", None), "request", None)
        except Exception:  # noqa: BLE001 - httpx raises when a response has no request
            request = None
    url = str(getattr(request, "url", "") or "")
    for needle, name in _HOSTS.items():
        if needle in url:
            return name
    return sdk


def _classes(*dotted: str) -> tuple[type, ...]:
    """Exception classes from modules already imported (an exception of a module never
    imported cannot exist, so nothing heavy is imported here)."""
    found = []
    for path in dotted:
        mod, _, attr = path.rpartition(".")
        cls = getattr(sys.modules.get(mod), attr, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = 0
    while exc is not None and seen < 6:
        yield exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1


def is_transport(exc: BaseException) -> bool:
    transport = _classes("openai.APIConnectionError", "anthropic.APIConnectionError",
                         "httpx.TransportError", "httpx2.TransportError", "httpcore.NetworkError",
                         "httpcore.TimeoutException", "requests.exceptions.ConnectionError",
                         "requests.exceptions.Timeout", "aiohttp.ClientConnectionError",
                         "google.auth.exceptions.TransportError")
    return isinstance(exc, transport + (TimeoutError, ConnectionError))


def is_timeout(exc: BaseException) -> bool:
    timeouts = _classes("openai.APITimeoutError", "anthropic.APITimeoutError",
                        "httpx.TimeoutException", "httpx2.TimeoutException",
                        "requests.exceptions.Timeout")
    return any(isinstance(e, timeouts + (TimeoutError,)) for e in _chain(exc))


def is_bad_url(exc: BaseException) -> bool:
    bad = _classes("httpx.UnsupportedProtocol", "httpx2.UnsupportedProtocol", "httpx.InvalidURL",
                   "httpx2.InvalidURL")
    return bool(bad) and any(isinstance(e, bad) for e in _chain(exc))
