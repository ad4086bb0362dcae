"""Benchmark: one provider's cap and pause across two Dask workers, per process or on Prefect.

Two Dask worker processes (2 threads each) call one loopback OpenAI-compatible provider through
the real openai SDK and the meter every call passes (core.accounting.metering), against a real
`prefect server start` started here. Each of two gates runs in turn, in the same run:

    per-process   today's without a server: each worker's own ProviderGate
                  (core.accounting.pacing), at RESEARCHFLOW_MAX_CALLS_PER_MINUTE each
    shared        the gate a worker gets with a server in use (tasks/shared_pacing.py): the
                  cap is a Prefect rate limit with slot decay, the pause a Prefect Variable

Two phases for each gate, with a provider name of their own on the server:

    cap     both workers call as fast as the gate lets them for `--seconds` (60) with a cap of
            `--cap` (60) calls a minute: the calls the provider saw, the most in any 60 s, and
            calls per minute over the phase
    pause   no cap; after 5 s the provider answers one call of worker A with a 429 and
            retry-after 10 s: the calls worker B made in those 10 s (and A's)

    python bench/scale.py --pacing                 # or: python bench/scale_pacing.py
    python bench/scale_pacing.py --cap 30 --seconds 60 --llm-ms 100
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

KINDS = ("per-process", "shared")
RETRY_AFTER = 10
PAUSE_AT = 5.0  # seconds into the pause phase
THREADS = 2  # per worker
IN_FLIGHT = 0.5  # seconds after the 429 in which a call may have left before it was known
PRICES = {"bench": {"input": 0.15, "output": 0.6}}


# -- in a Dask worker ----------------------------------------------------------------------------

def calls_from(worker: str, kind: str, name: str, cap: int | None, seconds: float,
               base_url: str) -> int:
    """Call the provider from THREADS threads for `seconds`, through a gate of `kind`; the
    calls made (a rate-limited one included)."""
    from core.accounting.ledger import Ledger
    from core.accounting.metering import Billing
    from core.accounting.prices import PriceTable
    from core.llm.registry import make_model
    from core.models import Message
    from core.overflow.tokens import TokenEstimator
    from core.settings import RunConfig
    from core.signals import Signal
    from tasks.shared_pacing import shared_gates

    gates = None
    if kind == "shared":
        make = shared_gates()
        gates = lambda provider, calls, tokens: make(name, calls, tokens)  # noqa: E731
    billing = Billing(Ledger(None), PriceTable(PRICES), None, TokenEstimator(), calls_per_minute=cap,
                      gates=gates)
    config = RunConfig(cache_dir=tempfile.gettempdir(), db_path="unused",
                       base_urls=(("openai", base_url),), json_mode="instruction")
    model = billing.model(make_model("openai-compatible:bench", config))
    end = time.monotonic() + seconds
    made = [0] * THREADS

    def loop(i: int) -> None:
        while time.monotonic() < end:
            try:
                model.complete([Message(role="user", content=f"worker {worker} call")],
                               max_tokens=16)
            except Signal:
                pass  # a 429: its pause is the gate's; the next call waits at it
            made[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(made)


# -- the provider --------------------------------------------------------------------------------

class Provider:
    """Answers every call after `latency`; records (time, worker); one 429 on demand."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.seen: list[tuple[float, str]] = []
        self.refuse_worker: str | None = None
        self.refused_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self, rec):
        from tests.fakes import providers as fake
        from tests.fakes.http import Reply

        found = re.search(r"worker (\w+) call", rec.body.decode("utf-8", "replace"))
        worker = found.group(1) if found else "?"
        now = time.time()
        with self._lock:
            self.seen.append((now, worker))
            refuse = self.refuse_worker == worker
            if refuse:
                self.refuse_worker, self.refused_at = None, now
        if refuse:
            return fake.rate_limit_error("openai", retry_after=RETRY_AFTER)
        time.sleep(self.latency)
        return Reply(200, {"id": "x", "object": "chat.completion", "created": 0,
                           "model": "bench", "choices": [{
                               "index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": "ok"}}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 1,
                                     "total_tokens": 6}})

    def between(self, start: float, end: float) -> list[tuple[float, str]]:
        with self._lock:
            return [(t, w) for t, w in self.seen if start <= t < end]


def most_in_a_minute(times: list[float]) -> int:
    times = sorted(times)
    most, first = 0, 0
    for last, t in enumerate(times):
        while t - times[first] >= 60.0:
            first += 1
        most = max(most, last - first + 1)
    return most


# -- the run -------------------------------------------------------------------------------------

def phase(client, workers: list[str], provider: Provider, url: str, kind: str, *,
          cap: int | None, seconds: float, pause: bool) -> dict:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    start = time.time()
    futures = [client.submit(calls_from, letter, kind, name, cap, seconds, url, pure=False,
                             workers=[address], allow_other_workers=False)
               for letter, address in zip("AB", workers)]
    if pause:
        time.sleep(PAUSE_AT)
        provider.refuse_worker = "A"
    client.gather(futures)
    # A thread held at the gate when the phase ends still makes its call: not counted.
    seen = provider.between(start, start + seconds)
    out = {"calls": len(seen), "seconds": seconds}
    if not pause:
        times = [t for t, _ in seen]
        out["most_in_60s"] = most_in_a_minute(times)
        out["per_minute"] = len(seen) / seconds * 60
        return out
    told = provider.refused_at
    if told is None:
        out["b_in_pause"] = out["a_in_pause"] = None
        return out
    after = [(t, w) for t, w in seen if told < t < told + RETRY_AFTER]
    out["b_in_pause"] = sum(w == "B" for _, w in after)
    out["a_in_pause"] = sum(w == "A" for _, w in after)
    # Sent before the pause could be known: the 429 reaches A, A's gate writes the pause.
    out["b_in_flight"] = sum(w == "B" and t < told + IN_FLIGHT for t, w in after)
    out["a_in_flight"] = sum(w == "A" and t < told + IN_FLIGHT for t, w in after)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=60, help="calls a minute")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the cap phase")
    parser.add_argument("--llm-ms", type=float, default=100.0)
    args = parser.parse_args(argv)
    from bench.workspace import workspace

    workspace("rf-bench-pacing-")  # before Prefect is imported
    import distributed

    from tests.fakes.http import ScriptedServer
    from tests.fakes.prefect_server import PrefectServer

    provider = Provider(args.llm_ms / 1000)
    work = Path(tempfile.mkdtemp(prefix="rf-bench-pacing-"))
    results: dict[str, dict] = {}
    with PrefectServer(work / "prefect-server", quiet=True) as api, \
            ScriptedServer(default=provider) as llm:
        os.environ["PREFECT_API_URL"] = api  # the workers inherit it
        url = llm.url + "/v1"
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=THREADS,
                                      dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            workers = sorted(client.scheduler_info()["workers"])
            for kind in KINDS:
                results[kind] = {
                    "cap": phase(client, workers, provider, url, kind, cap=args.cap,
                                 seconds=args.seconds, pause=False),
                    "pause": phase(client, workers, provider, url, kind, cap=None,
                                   seconds=PAUSE_AT + RETRY_AFTER + 3, pause=True)}
    print(report(results, args))
    return 0


def report(results: dict, args) -> str:
    lines = [f"two Dask workers x {THREADS} threads, one loopback provider ({args.llm_ms:.0f} ms "
             f"a call), cap {args.cap} calls/min", "",
             f"{'gate':<12} {'calls in ' + format(args.seconds, '.0f') + ' s':>12} "
             f"{'most in 60 s':>13} {'calls/min':>10}   {'429 (retry-after 10 s): calls in the 10 s':<40}"]
    for kind, got in results.items():
        cap, pause = got["cap"], got["pause"]
        lines.append(f"{kind:<12} {cap['calls']:>12} {cap['most_in_60s']:>13} "
                     f"{cap['per_minute']:>10.1f}   worker B {pause['b_in_pause']} "
                     f"({pause['b_in_flight']} within {IN_FLIGHT} s), "
                     f"worker A (told) {pause['a_in_pause']} ({pause['a_in_flight']} within "
                     f"{IN_FLIGHT} s)")
    lines.append("")
    lines.append(f"target: at most {args.cap} in any 60 s for both workers together; "
                 "no call from either worker while the provider said wait (a call within "
                 f"{IN_FLIGHT} s of the 429 left before anyone knew of it)")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
