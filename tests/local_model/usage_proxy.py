"""A loopback relay in front of the real llama-server that writes down the `usage` the server
sent with each completion the client received, so a test can hold the ledger to the server's
own counts (and see every request's `max_tokens` and `response_format`)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass
class Exchange:
    path: str
    request: dict[str, Any]
    status: int
    usage: dict[str, Any] | None
    finish_reason: str | None
    seconds: float


@dataclass
class UsageProxy:
    upstream: str  # the server's root, http://127.0.0.1:PORT
    exchanges: list[Exchange] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._relay(None)

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                self._relay(self.rfile.read(length))

            def _relay(self, body: bytes | None) -> None:
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization", "accept")}
                started = time.monotonic()
                with httpx.Client(timeout=900) as client:
                    reply = client.request(self.command, proxy.upstream + self.path,
                                           content=body, headers=headers)
                try:
                    self.send_response(reply.status_code)
                    self.send_header("content-type", reply.headers.get("content-type",
                                                                       "application/json"))
                    self.send_header("content-length", str(len(reply.content)))
                    self.end_headers()
                    self.wfile.write(reply.content)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (its read timeout): it never got this answer
                proxy._note(self.path, body, reply, time.monotonic() - started)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def __enter__(self) -> "UsageProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def completions(self) -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def _note(self, path: str, body: bytes | None, reply: httpx.Response,
              seconds: float) -> None:
        request = json.loads(body) if body else {}
        usage, finish = None, None
        text = reply.text
        if request.get("stream"):  # SSE: the last chunk that carries usage
            for line in text.splitlines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk = json.loads(line[6:])
                    usage = chunk.get("usage") or usage
                    for choice in chunk.get("choices") or ():
                        finish = choice.get("finish_reason") or finish
        elif reply.headers.get("content-type", "").startswith("application/json"):
            data = reply.json()
            if isinstance(data, dict):
                usage = data.get("usage")
                choices = data.get("choices") or [{}]
                finish = choices[0].get("finish_reason")
        with self._lock:
            self.exchanges.append(Exchange(path, request, reply.status_code, usage, finish,
                                           round(seconds, 1)))

    def table(self) -> str:
        """One line per completion: what it asked for and what the server did."""
        return "\n".join(
            f"{e.status} max_tokens={e.request.get('max_tokens')} "
            f"format={(e.request.get('response_format') or {}).get('type')} "
            f"in={(e.usage or {}).get('prompt_tokens')} out={(e.usage or {}).get('completion_tokens')} "
            f"finish={e.finish_reason} {e.seconds}s" for e in self.completions())
