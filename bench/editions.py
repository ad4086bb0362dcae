"""Benchmark: a scheduled batch on three days. What does each new edition cost?

A CSV of two topics runs through the real batch flow and the real openai SDK against the loopback
research provider (tests/fakes/editions_scenario.py), over a corpus of three pages:

- day 1: the first edition;
- day 2: a new edition, nothing changed;
- day 3: a new edition, one number edited on one page.

Per day it prints the provider calls that succeeded, the LLM tokens they used, their cost from
the ledger, the share of day 1's tokens (target for an unchanged edition: at most 5%), how many
reports the store holds, whether the day's reports are new ones (an edition per run) or
yesterday's reused, and how many calls were byte-identical to a request answered before (paid
again although the call memo could have served them; target 0).

    python bench/editions.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

from bench.workspace import workspace  # noqa: E402  (before Prefect is imported)

TARGET = 0.05  # an unchanged edition's tokens, as a share of the first's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    work = workspace("rf-bench-editions-")
    from flows.local_api import ensure_api
    from tests.fakes.editions_scenario import SUBJECTS, EditionsScenario

    ensure_api(timeout=600)  # one local API for the three days (slow to start on a busy box)

    with EditionsScenario(work / "run") as scenario:
        rows = _days(scenario, SUBJECTS)
    return _print(rows)


def _days(scenario, subjects) -> list:
    days = [("day 1: first edition", "2026-12-01", None),
            ("day 2: nothing changed", "2026-12-02", None),
            ("day 3: one page changed", "2026-12-03",
             lambda: scenario.edit_number(subjects[0], 0, 9))]
    rows = []
    for label, edition, change in days:
        if change is not None:
            change()
        day = scenario.day(edition)
        print(f"  {label}: {day}", file=sys.stderr, flush=True)
        rows.append((label, day))
    return rows


def _print(rows: list) -> int:
    first = rows[0][1]
    head = ("day", "state", "ok calls", "LLM tokens (in + out)", "cost USD", "share of day 1",
            "reports stored", "new reports", "calls byte-identical to earlier ones")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    seen: set[str] = set()
    for label, d in rows:
        new = len(set(d.report_ids) - seen)
        seen |= set(d.report_ids)
        print(f"| {label} | {d.state} | {d.calls} | {d.input_tokens + d.output_tokens:,} "
              f"({d.input_tokens:,} + {d.output_tokens:,}) | {d.cost_usd:.6f} | "
              f"**{d.share_of(first):.1%}** | {d.reports} | {new} of {len(d.report_ids)} | "
              f"{d.repeated} |")
    unchanged = rows[1][1]
    researched = len(set(unchanged.report_ids) - set(first.report_ids)) == len(first.report_ids)
    met = researched and unchanged.share_of(first) <= TARGET
    print(f"\ntarget (day 2 is a new edition of every topic, at <= {TARGET:.0%} of day 1's "
          f"tokens): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
