"""Benchmark: one topic on a real local model, SmolLM2-135M served by llama.cpp's llama-server
(built from source on first use: tests/local_model/llama.py), beside the offline engine.

The topic runs through the CLI (`researchflow run`, its own Prefect server) with no context
window configured, over a small corpus, with a relay in front of the server that writes down
each call's `max_tokens` and the server's own `usage`. It prints:

- wall time of each engine's run, and how the topic ended;
- per role: calls, output tokens, the largest output against the role's cap, and fallbacks
  (roles the extractive engine answered because the model's answers stayed invalid);
- requests that overflowed (target: 0) and calls that stopped at their cap;
- citations and how many are verbatim (target: all), for both engines.

    python bench/local_model.py [--ctx 8192] [--fallback extractive|none] [--pages N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests importable
    sys.path.insert(0, str(ROOT))

TOPIC = "How does Python's asyncio event loop schedule coroutines?"
OPTIONS = ["--max-subquestions", "2", "--max-waves", "1", "--max-rounds", "1",
           "--report-words", "200"]


def _run(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    started = time.monotonic()
    done = subprocess.run([str(Path(sys.executable).parent / "researchflow"), *args], env=env,
                          capture_output=True, text=True, timeout=3600)
    return time.monotonic() - started, done.returncode, (done.stdout + done.stderr).strip()


def _verbatim(db: Path) -> tuple[int, int]:
    from core.store.query import query_readonly

    _, rows = query_readonly(db, "SELECT c.quote, s.text FROM citations c JOIN sources s "
                                 "USING (url, content_hash)")
    return len(rows), sum(quote in text for quote, text in rows)


def _roles(db: Path) -> dict[str, dict[str, int]]:
    from core.store.query import query_readonly

    _, rows = query_readonly(db, "SELECT role, outcome, count(*), coalesce(sum(output_tokens), 0),"
                                 " coalesce(max(output_tokens), 0) FROM ledger "
                                 "GROUP BY role, outcome")
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for role, outcome, n, out, largest in rows:
        entry = table[role]
        if outcome == "fallback":
            entry["fallbacks"] += n
        else:
            entry["calls"] += n
            entry["output"] += out
            entry["largest"] = max(entry["largest"], largest)
    return table


def _cap(role: str) -> str:
    from core.engine.model_driven.calls import ROLE_OUTPUT_TOKENS
    from core.engine.model_driven.writer import HEADROOM, report_tokens

    if role == "report":
        return str(int(report_tokens(200, "en") * HEADROOM))
    return str(ROLE_OUTPUT_TOKENS.get(role, "-"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctx", type=int, default=8192, help="llama-server's -c")
    parser.add_argument("--fallback", default="extractive", choices=["extractive", "none"])
    parser.add_argument("--pages", default="2", help="--max-pages")
    args = parser.parse_args()

    from tests.flows.conftest import DOCS
    from tests.local_model.llama import LlamaServer
    from tests.local_model.usage_proxy import UsageProxy

    work = Path(tempfile.mkdtemp(prefix="bench-local-model-"))
    corpus = work / "corpus"
    corpus.mkdir()
    for name, text in DOCS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "RESEARCHFLOW_", "PREFECT_"))}
    base.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", RESEARCHFLOW_FALLBACK=args.fallback)
    common = ["--search", "corpus", "--corpus", str(corpus), *OPTIONS, "--max-pages", args.pages]

    results = {}
    with LlamaServer(ctx=args.ctx) as server, UsageProxy(server.root) as proxy:
        for engine, model in (("smollm2", "openai-compatible:smollm2"), ("offline", "offline")):
            db = work / f"{engine}.duckdb"
            env = {**base, "PREFECT_HOME": str(work / engine / "prefect"),
                   "RESEARCHFLOW_CACHE_DIR": str(work / engine / "cache"),
                   "OPENAI_BASE_URL": proxy.base_url}
            seconds, code, output = _run(["run", TOPIC, "--model", model, "--db", str(db),
                                          *common], env)
            results[engine] = (seconds, code, output, db)
        sent = proxy.completions()

    print(f"topic: {TOPIC!r}; llama-server -c {args.ctx} -t 1; --fallback {args.fallback}; "
          f"--max-pages {args.pages}; no context window configured\n")
    print(f"{'engine':<10}{'wall s':>8}{'exit':>6}{'citations':>11}{'verbatim':>10}")
    for engine, (seconds, code, output, db) in results.items():
        cited, verbatim = _verbatim(db) if db.exists() else (0, 0)
        print(f"{engine:<10}{seconds:>8.1f}{code:>6}{cited:>11}{verbatim:>10}")
    seconds, code, output, db = results["smollm2"]
    print("\nSmolLM2 per role (largest output against the role's cap):")
    print(f"{'role':<11}{'calls':>6}{'out tok':>9}{'largest':>9}{'cap':>7}{'fallbacks':>11}")
    for role, entry in sorted(_roles(db).items()) if db.exists() else ():
        print(f"{role:<11}{entry['calls']:>6}{entry['output']:>9}{entry['largest']:>9}"
              f"{_cap(role):>7}{entry['fallbacks']:>11}")
    overflows = sum(e.status == 400 and "exceed" in str(e.request) for e in sent)
    errors = sum(e.status != 200 for e in sent)
    at_cap = sum(e.finish_reason == "length" for e in sent)
    print(f"\nrequests: {len(sent)}; non-200 answers: {errors} (overflows: {overflows}); "
          f"stopped at their cap: {at_cap}; output tokens, server's count: "
          f"{sum((e.usage or {}).get('completion_tokens', 0) for e in sent)}")
    last = [line for line in output.splitlines() if line.strip()][-3:]
    print("closing lines:\n  " + "\n  ".join(last))


if __name__ == "__main__":
    main()
