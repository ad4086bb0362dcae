"""`researchflow mcp --http` on a free loopback port, for a `with` block."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(sys.executable).parent


@contextmanager
def mcp_over_http(args: list[str], *, env: dict[str, str], cwd: Path, log: Path
                  ) -> Iterator[int]:
    """The server started with `args` after `mcp --http 127.0.0.1:PORT`, once it listens;
    yields PORT. Its output goes to `log`; it is stopped when the block ends."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with log.open("wb") as out:
        server = subprocess.Popen([str(BIN / "researchflow"), "mcp", "--http",
                                   f"127.0.0.1:{port}", *args], env=env, cwd=cwd, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 90
            while True:
                assert server.poll() is None, log.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the MCP server did not listen"
                    time.sleep(0.3)
            yield port
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
