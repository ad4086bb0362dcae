"""A scripted HTTP server on 127.0.0.1 for contract tests.

Each test queues `Reply`s (status, headers, JSON or raw body, or a list of SSE events); the server
answers requests in order and records what it was sent, so the real SDK clients can be pointed at
it through their base URL. A `handler` callable may be queued instead of a fixed reply, for servers
that must look at the request (for example to enforce a context window).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON; str/bytes -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    sse: list[str] | None = None  # raw SSE event blocks ("event: x\ndata: {...}")

    def encode(self) -> tuple[bytes, dict[str, str]]:
        headers = dict(self.headers)
        if self.sse is not None:
            headers.setdefault("content-type", "text/event-stream")
            return "".join(block.rstrip("\n") + "\n\n" for block in self.sse).encode(), headers
        if isinstance(self.body, (dict, list)):
            headers.setdefault("content-type", "application/json")
            return json.dumps(self.body).encode(), headers
        if isinstance(self.body, str):
            headers.setdefault("content-type", "text/plain")
            return self.body.encode(), headers
        return self.body or b"", headers


Handler = Callable[[Recorded], Reply]


class ScriptedServer:
    """`with ScriptedServer() as srv: srv.push(Reply(...)); client(base_url=srv.url)`."""

    def __init__(self, default: Reply | Handler | None = None) -> None:
        self.queue: deque[Reply | Handler] = deque()
        self.default = default
        self.requests: list[Recorded] = []
        server = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                               self.rfile.read(length) if length else b"")
                server.requests.append(rec)
                item = server.queue.popleft() if server.queue else server.default
                if item is None:
                    item = Reply(500, {"error": {"message": "ScriptedServer: nothing queued"}})
                reply = item(rec) if callable(item) else item
                payload, headers = reply.encode()
                self.send_response(reply.status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        class _Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                pass  # a client that hung up (timeout tests) is expected, not noise to print

        self._httpd = _Server(("127.0.0.1", 0), _H)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *items: Reply | Handler) -> "ScriptedServer":
        self.queue.extend(items)
        return self

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
