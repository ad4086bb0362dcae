"""Flow tests: a small corpus of our own and a fresh DuckDB file per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks import contexts

DOCS = {
    "threads.md": """# Threads

Threading runs several threads inside one process, and they share the same memory. Because of
the global interpreter lock, only one thread executes Python bytecode at a time. Threads are a
good fit for I/O-bound work such as waiting on sockets or files. A lock protects shared data
from concurrent modification by two threads.
""",
    "processes.txt": """Processes

The multiprocessing module starts separate processes, each with its own interpreter and memory.
Processes side-step the global interpreter lock, so CPU-bound work can run in parallel on several
cores. Data is shared between processes through queues and pipes, which pickle the objects they
carry. Starting a process costs more than starting a thread.
""",
    "asyncio.html": """<html><head><title>Asyncio event loop</title></head><body>
<article><h1>Asyncio</h1>
<p>Asyncio runs coroutines on a single-threaded event loop. A coroutine gives up control at each
await, so thousands of I/O-bound tasks can wait concurrently without threads.</p>
<p>Cancellation raises CancelledError inside the coroutine, and asyncio.timeout cancels work that
takes too long. Blocking calls stall the whole event loop, so CPU-bound work does not belong in a
coroutine.</p>
</article></body></html>""",
}


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture(autouse=True)
def fresh_contexts():
    contexts.close()
    yield
    contexts.close()
