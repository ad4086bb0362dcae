"""A stub PostgreSQL listener on 127.0.0.1 that asks every client for its password in clear
text and records what it is sent: where a planted setting would send PGPASSWORD."""

from __future__ import annotations

import socket
import struct
import threading


class PasswordListener:
    """`with PasswordListener() as pg:` ... `pg.port`, `pg.received` (bytes per connection)."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "PasswordListener":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    data += conn.recv(8192)  # SSLRequest or the startup message
                    if data[4:8] == struct.pack("!I", 80877103):  # SSLRequest: no TLS here
                        conn.sendall(b"N")
                        data += conn.recv(8192)
                    conn.sendall(b"R" + struct.pack("!II", 8, 3))  # cleartext password, please
                    data += conn.recv(8192)
                except OSError:
                    pass
                self.received.append(data)

    def saw(self, secret: str) -> bool:
        return any(secret.encode() in data for data in self.received)
