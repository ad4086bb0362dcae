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

Cases (`--cases`): `step`, the refused step makes one call; and the multi-call steps, where the
refusal comes after a call of the same step succeeded (tests/fakes/rerun_scenario.py): `chunked`
(the second piece of a page condensed in pieces), `reask` (the re-ask after a prose answer
to a JSON question), `shrink` (the second half of a page halved after an overflow).

It prints, per case and way of rerunning: successful provider calls in the first run, calls made by the
rerun, successful calls repeated (a request byte-identical to one already answered; target 0),
reports stored (target 2, each once).

    python bench/rerun.py                    # every case, every way
    python bench/rerun.py --ways cli --cases chunked --step compress
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
                        help="case step: the role refused for the second topic (report, "
                             "compress, review, ...)")
    parser.add_argument("--cases", nargs="+", default=["step", "chunked", "reask", "shrink"],
                        choices=["step", "chunked", "reask", "shrink"])
    args = parser.parse_args(argv)
    work = workspace("rf-bench-rerun-")
    from tests.fakes.rerun_scenario import RerunScenario

    rows = []
    for case in args.cases:
        for way in args.ways:
            scenario = RerunScenario(work / f"{case}-{way}", refuse_role=args.step, case=case)
            result = scenario.run(way)
            print(f"  {case} {way}: {result}", file=sys.stderr, flush=True)
            rows.append((case, way, result))
    head = ("case", "rerun by", "refused", "ok calls, first run", "failed topics, first run",
            "calls by the rerun", "ok calls repeated", "reports stored (distinct)")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    refused = {"step": args.step, "chunked": "condense, 2nd piece",
               "reask": "choose, the re-ask", "shrink": "condense, 2nd half"}
    for case, way, r in rows:
        print(f"| {case} | {way} | {refused[case]} | {r.first_ok} | {r.first_failed} | "
              f"{r.rerun_calls} | **{r.repeated}** | {r.reports} ({r.distinct_reports}) |")
    missed = [f"{case} {way}" for case, way, r in rows
              if r.repeated or r.reports != 2 or r.distinct_reports != 2]
    print(f"\ntarget (no successful call repeated, both reports stored once): "
          f"{'met' if not missed else 'MISSED by ' + ', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
