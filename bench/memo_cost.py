"""Benchmark: what the call memo (core.accounting.memo) costs a billed call, and what a batch pays
for it.

A `MeteredModel` around a model that answers at once (no network) and a ledger that keeps its
rows in memory (a served call writes a ledger row like any call; that row's cost is the ledger's,
not the memo's), with the memo off (RESEARCHFLOW_MEMO_TTL_HOURS 0) and on, its records in a real
DuckDB file: what is left is the memo's own cost. It prints the wall and CPU per call for: calls
with the memo off; first calls with it on (a lookup that misses, and the answer recorded, written in
batches like the ledger); repeats (served from memory); repeats in a fresh process (served from the
store). The last column multiplies the extra cost by the calls of bench/overhead.py's default batch
(10 topics: ~530 LLM calls and ~100 searches), next to that batch's wall time of about a minute.

    python bench/memo_cost.py --calls 500
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BATCH_CALLS = 630  # bench/overhead.py, 10 topics: LLM calls + searches


class _Instant:
    """A chat model that answers at once, the way a provider's reply looks to the meter."""

    provider = "openai"
    key_env_var = None
    model = "gpt-4o-mini"

    def complete(self, messages, *, max_tokens, json_schema=None, temperature=0.0):
        from core.llm.base import Completion, Usage

        return Completion(text='{"ids": [1, 2, 3], "note": "timings"}', model=self.model,
                          usage=Usage(input_tokens=1200, output_tokens=30), finish_reason="stop")


def _model(db: Path, ttl: float):
    from core.accounting.ledger import Ledger
    from core.accounting.memo import CallMemo
    from core.accounting.metering import MeteredModel
    from core.accounting.pacing import ProviderGate
    from core.accounting.prices import PriceTable
    from core.store import ResultStore
    from core.store.call_memo import MemoStore

    memo = CallMemo(MemoStore(db), ttl_hours=ttl, batch_seconds=0.5) if ttl else None
    ResultStore(db)  # the schema, as a run has it
    return MeteredModel(_Instant(), Ledger(None), PriceTable(), ProviderGate(), memo=memo)


def _timed(model, n: int, offset: int = 0) -> tuple[float, float]:
    from core.accounting.ledger import acting_as, scoped
    from core.models import Message

    wall, cpu = time.perf_counter(), time.process_time()
    with scoped(run_id="bench", batch_id="b", topic_id="t", edition="e"), acting_as("condense"):
        for i in range(offset, offset + n):
            model.complete([Message(role="system", content="Pick the evidence. " * 40),
                            Message(role="user", content=f"Page {i}: " + "a sentence. " * 300)],
                           max_tokens=256)
    model.meter.ledger.flush()
    if model.memo is not None:
        model.memo.flush()
    return ((time.perf_counter() - wall) / n * 1000, (time.process_time() - cpu) / n * 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="rf-bench-memo-"))
    n = args.calls
    off = _timed(_model(work / "off.duckdb", 0), n)
    on = _model(work / "on.duckdb", 24)
    first = _timed(on, n)
    repeat = _timed(on, n)
    from core.store.connection import release_all

    release_all()
    fresh = _timed(_model(work / "on.duckdb", 24), n)
    print(f"{n} calls each, DuckDB file in {work}\n")
    print("| calls | wall ms per call | CPU ms per call | extra CPU for the default "
          "overhead batch (s) |")
    print("|---|---|---|---|")
    for name, (wall, cpu) in (("memo off", off), ("memo on, first calls (miss + record)", first),
                              ("memo on, repeats in the process", repeat),
                              ("memo on, repeats in a fresh process (from the store)", fresh)):
        extra = (cpu - off[1]) * BATCH_CALLS / 1000
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | "
              f"{'-' if name == 'memo off' else f'{extra:+.2f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
