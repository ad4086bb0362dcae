"""Loopback servers that misbehave at the transport level (for timeout and connection tests)."""

from __future__ import annotations

import socket
import threading
from typing import Iterator

import pytest

from tests.fakes.http import ScriptedServer


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that accepts connections (the kernel backlog does) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def refused_url() -> str:
    """A port nothing listens on: connecting is refused at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def hangup_url() -> Iterator[str]:
    """A server that reads the request and closes the connection without a reply."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    conn.recv(65536)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        sock.close()


@pytest.fixture(scope="module")
def _shared_server():
    with ScriptedServer() as srv:  # one per module: shutting a server down costs 0.5 s
        yield srv


@pytest.fixture
def server(_shared_server: ScriptedServer) -> ScriptedServer:
    _shared_server.queue.clear()
    _shared_server.requests.clear()
    _shared_server.default = None
    return _shared_server
