"""One process calling through a provider's gate, for the tests and bench of shared limits.

    python -m tests.fakes.gate_worker shared|process PROVIDER CALLS_PER_MINUTE CALLS OUT.json

passes the gate CALLS times (a SharedGate on the Prefect server at PREFECT_API_URL, or this
process's own ProviderGate) and writes the wall-clock second each call was let through.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(kind: str, provider: str, per_minute: str, calls: str, out: str) -> None:
    from core.accounting.pacing import ProviderGate
    from tasks.shared_pacing import SharedGate

    cap = int(per_minute) or None
    gate = SharedGate(provider, cap) if kind == "shared" else ProviderGate(cap)
    passed = []
    for _ in range(int(calls)):
        gate.wait()
        passed.append(time.time())
    Path(out).write_text(json.dumps(passed))


if __name__ == "__main__":
    main(*sys.argv[1:])
