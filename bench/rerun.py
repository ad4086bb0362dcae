"""Benchmark: a batch whose second topic is refused partway, rerun. Calls repeated (target 0).

A CSV of two topics runs through the real flows and the real openai SDK against the loopback
research provider (tests/fakes/research_provider.py). The provider refuses one step of the
second topic (its report, by default, the last provider call; `--step` picks another role)
with a fatal 400, so that topic fails after most of its calls succeeded. The cause is then
removed and the batch rerun, the way a user would:

- `cli`: `researchflow batch` again (a new flow run of the batch);
- `retry`: the same flow run retried, as `prefect flow-run retry` or the UI's Retry do: the
  batch is served as a deployment by a real Prefect server, the failed run is set back to
  Scheduled and the runner executes it again under the same flow-run id;
- `researchflow-retry`: the CLI's run retried as the same flow run by `researchflow retry ID`
  (a run with no deployment: the command names its flow's entrypoint).

It prints, per way of rerunning: successful provider calls in the first run, calls made by the
rerun, successful calls repeated (a request byte-identical to one already answered; target 0),
reports stored (target 2, each once).

    python bench/rerun.py                    # both ways
    python bench/rerun.py --ways cli --step compress
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

from bench.workspace import workspace  # noqa: E402  (before Prefect is imported)

WAYS = ("cli", "retry", "researchflow-retry")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    parser.add_argument("--step", default="report",
                        help="role refused for the second topic (report, compress, review, ...)")
    args = parser.parse_args(argv)
    work = workspace("rf-bench-rerun-")
    from tests.fakes.rerun_scenario import RerunScenario

    rows = []
    for way in args.ways:
        scenario = RerunScenario(work / way, refuse_role=args.step)
        result = scenario.run(way)
        print(f"  {way}: {result}", file=sys.stderr, flush=True)
        rows.append((way, result))
    head = ("rerun by", "refused step", "ok calls, first run", "failed topics, first run",
            "calls by the rerun", "ok calls repeated", "reports stored (distinct)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for way, r in rows:
        print(f"| {way} | {args.step} | {r.first_ok} | {r.first_failed} | {r.rerun_calls} | "
              f"**{r.repeated}** | {r.reports} ({r.distinct_reports}) |")
    missed = [way for way, r in rows if r.repeated or r.reports != 2 or r.distinct_reports != 2]
    print(f"\ntarget (no successful call repeated, both reports stored once): "
          f"{'met' if not missed else 'MISSED by ' + ', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
