"""The demo's memory: peak RSS of `researchflow batch examples/topics.csv`, as a new user runs it.

Runs the CLI of a checkout (--root, default this tree) in a fresh folder: its own DuckDB file,
PREFECT_HOME and cache folder (so the CPython docs corpus is built and indexed in the run, as on
a first `make demo`). With --api-url the batch talks to a running Prefect server; without, the
CLI starts its own as a child, as the demo does.

Printed per run:

  batch peak RSS     VmHWM of the batch process itself (/proc, read until it exits: the
                     kernel's high-water mark, not a sample of RSS)
  tree peak RSS      ru_maxrss from wait4: the largest single process among the batch and its
                     reaped children (what GNU `time -v` prints as "Maximum resident set size")
  wall s, CPU s      CPU is user + system of the batch and its children: less skewed than wall
                     time on a shared machine
  succeeded          rows of the CLI's closing table whose status is succeeded

    .venv/bin/python bench/demo_memory.py                        # this tree
    git worktree add /tmp/demo-before 730d974 && (cd /tmp/demo-before && make install)
    .venv/bin/python bench/demo_memory.py --root /tmp/demo-before  # the code before issue 21
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MB = 1024  # issue 21: the demo fits a laptop's memory


def _hwm_kb(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    m = re.search(r"^VmHWM:\s+(\d+)\s+kB", status, re.M)
    return int(m.group(1)) if m else 0


def run_demo(root: Path, work: Path, api_url: str | None) -> dict[str, object]:
    """One `researchflow batch examples/topics.csv` of `root`, everything it writes in `work`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RESEARCHFLOW_", "PREFECT_"))}
    env.update(XDG_CACHE_HOME=str(work / "cache"), PREFECT_HOME=str(work / "prefect"),
               RESEARCHFLOW_DB_PATH=str(work / "demo.duckdb"))
    if api_url:
        env["PREFECT_API_URL"] = api_url
    command = [str(root / ".venv" / "bin" / "researchflow"), "batch",
               str(root / "examples" / "topics.csv")]
    log = (work / "batch.log").open("w")
    began = time.monotonic()
    process = subprocess.Popen(command, cwd=work, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    hwm = 0
    while True:
        hwm = max(hwm, _hwm_kb(process.pid))  # a zombie has no VmHWM: read it while alive
        done, status, usage = os.wait4(process.pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - began
    log.close()
    out = (work / "batch.log").read_text(errors="replace")
    return {"rc": process.returncode, "batch_mb": hwm / 1024, "tree_mb": usage.ru_maxrss / 1024,
            "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "succeeded": len(re.findall(r"^\W*succeeded\b", out, re.M)), "tail": out[-600:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout whose CLI to run (its .venv); default: this tree")
    parser.add_argument("--api-url", help="a running Prefect server's API (default: the CLI "
                                          "starts its own)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    print(f"tree: {root}\n{'run':>3} {'batch peak RSS':>15} {'tree peak RSS':>14} "
          f"{'wall s':>7} {'CPU s':>7} {'rc':>3} succeeded")
    worst = 0.0
    for n in range(1, args.runs + 1):
        work = Path(tempfile.mkdtemp(prefix="rf-demo-memory-"))
        r = run_demo(root, work, args.api_url)
        worst = max(worst, float(r["batch_mb"]))  # type: ignore[arg-type]
        print(f"{n:>3} {r['batch_mb']:>12.0f} MB {r['tree_mb']:>11.0f} MB {r['wall_s']:>7.0f} "
              f"{r['cpu_s']:>7.0f} {r['rc']:>3} {r['succeeded']}", flush=True)
        if r["rc"]:
            print(r["tail"], file=sys.stderr)
        if args.keep:
            print(f"    kept {work}")
        else:
            subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"worst batch peak {worst:.0f} MB: {'within' if worst <= LIMIT_MB else 'OVER'} "
          f"{LIMIT_MB} MB")
    return 0 if worst <= LIMIT_MB else 1


if __name__ == "__main__":
    sys.exit(main())
