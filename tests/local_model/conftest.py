"""The real model's tests share one llama-server per worker (they all run on one worker: the
`llama` xdist group), built from source on first use (tests/local_model/llama.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from tasks import contexts
from tests.local_model.llama import LlamaServer


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    with LlamaServer(ctx=8192) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_contexts():
    contexts.close()
    yield
    contexts.close()
