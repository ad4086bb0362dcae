"""An SDK backend builds its client once, even when worker threads ask for it together."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from core.llm.base import SDKBackend


@dataclass
class SlowClientBackend(SDKBackend):
    provider: ClassVar[str] = "slow"
    built: int = 0

    def _build_client(self) -> Any:
        self.built += 1
        time.sleep(0.05)  # long enough for every thread to arrive while the first builds
        return object()


def test_one_client_for_many_threads():
    backend = SlowClientBackend("m")
    start = threading.Barrier(8)
    seen: list[Any] = []

    def ask() -> None:
        start.wait()
        seen.append(backend._sdk())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert backend.built == 1
    assert len({id(c) for c in seen}) == 1
