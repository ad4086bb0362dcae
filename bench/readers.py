"""Measurement: analysts reading the store while a batch writes it (issue 34).

Two scenarios over the 3-topic offline batch (`examples/topics.csv`, no keys, no network):

1. **Readers during a batch.** A fresh store; a batch runs; meanwhile a DuckDB CLI loop
   (`duckdb -readonly STORE -c 'SELECT count(*) FROM topics'`) and a Python loop (a new
   `duckdb.connect(STORE, read_only=True)` each try) read it as fast as they can. It prints each
   side's tries and failures (target 0 on both) with the first failure's message, and the
   batch's exit code.
2. **A batch while a notebook holds the store.** A Python process opens the store read-only
   and keeps it open; a batch then runs against the same store. Each batch runs with
   `--refresh`, so it does and writes all its work even when an earlier run cached it. It prints the batch's exit
   code, how long it took and its closing lines (target: exit 0, every topic succeeded).

    python bench/readers.py [--workdir DIR]

The DuckDB CLI comes from the `duckdb-cli` wheel (the test extra); the batch is the installed
`researchflow` command next to this interpreter.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TOPICS = ROOT / "examples" / "topics.csv"
SQL = "SELECT count(*) FROM topics"

_PY_READER = """
import sys, time, duckdb
path, stop = sys.argv[1], sys.argv[2]
import os
tries = fails = 0
first = ""
while not os.path.exists(stop):
    tries += 1
    try:
        con = duckdb.connect(path, read_only=True)
        con.execute("SELECT count(*) FROM topics").fetchone()
        con.close()
    except Exception as exc:
        fails += 1
        first = first or str(exc).splitlines()[0][:160]
    time.sleep(0.1)
print(tries, fails, first, sep="\\t")
"""

_NOTEBOOK = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(con.execute("SELECT count(*) FROM topics").fetchone()[0], flush=True)
time.sleep(float(sys.argv[2]))
print(con.execute("SELECT count(*) FROM topics").fetchone()[0], flush=True)
"""


def _batch(store: Path, log: Path) -> subprocess.Popen[bytes]:
    # --refresh: every step is done again (no task cache, no memo), so the batch writes as a
    # first run does, even when an earlier run cached these topics.
    args = [str(BIN / "researchflow"), "batch", str(TOPICS), "--db", str(store), "--refresh"]
    return subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=ROOT)


def _cli_loop(store: Path, stop: threading.Event, out: dict[str, object]) -> None:
    tries = fails = 0
    first = ""
    seen: list[str] = []
    while not stop.is_set():
        tries += 1
        done = subprocess.run([str(BIN / "duckdb"), "-readonly", "-csv", "-noheader", str(store),
                               "-c", SQL], capture_output=True, text=True)
        if done.returncode != 0 or "Error" in done.stderr:
            fails += 1
            first = first or (done.stderr.strip().splitlines() or ["?"])[0][:160]
        elif not seen or seen[-1] != done.stdout.strip():
            seen.append(done.stdout.strip())
        time.sleep(0.1)
    out.update(tries=tries, fails=fails, first=first, seen=seen)


def readers_during_batch(work: Path) -> None:
    store = work / "readers.duckdb"
    stop_file = work / "readers.stop"
    batch = _batch(store, work / "readers-batch.log")
    while not store.exists() and batch.poll() is None:
        time.sleep(0.05)
    stop = threading.Event()
    cli: dict[str, object] = {}
    thread = threading.Thread(target=_cli_loop, args=(store, stop, cli))
    thread.start()
    py = subprocess.Popen([sys.executable, "-c", _PY_READER, str(store), str(stop_file)],
                          stdout=subprocess.PIPE, text=True)
    code = batch.wait()
    stop.set()
    stop_file.touch()
    thread.join()
    tries, fails, first = (py.communicate()[0].rstrip("\n").split("\t") + ["", "", ""])[:3]
    print("1. readers during a 3-topic batch")
    print(f"   batch exit code: {code}")
    print(f"   duckdb CLI -readonly: {cli['fails']} of {cli['tries']} tries failed"
          + (f"  (first: {cli['first']})" if cli["first"] else ""))
    print(f"   python read_only:     {fails} of {tries} tries failed"
          + (f"  (first: {first})" if first else ""))
    print(f"   topics rows the CLI saw, in order: {' '.join(cli['seen']) or '-'}")


def batch_while_held(work: Path, hold: float = 240.0) -> None:
    store = work / "held.duckdb"
    first = _batch(store, work / "held-first.log").wait()
    if first != 0:
        print(f"2. the first batch (to create the store) exited {first}; see held-first.log")
        return
    notebook = subprocess.Popen([sys.executable, "-c", _NOTEBOOK, str(store), str(hold)],
                                stdout=subprocess.PIPE, text=True)
    assert notebook.stdout is not None
    notebook.stdout.readline()  # the store is open
    log = work / "held-batch.log"
    start = time.monotonic()
    code = _batch(store, log).wait()
    took = time.monotonic() - start
    notebook.kill()
    notebook.wait()
    lines = log.read_text(errors="replace").splitlines()
    outcomes = [ln for ln in lines if ln.startswith("│ ") and ("succeeded" in ln or "failed" in ln)]
    print("2. a batch started while a Python process holds the store open read_only")
    print(f"   batch exit code: {code}, {took:.1f} s")
    for line in outcomes or lines[-8:]:
        print("   " + line)
    for line in lines:
        if line.startswith("error:"):
            print("   " + line[:300])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--hold", type=float, default=240.0,
                        help="how long the notebook keeps the store open, seconds")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="rf-readers-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work}")
    readers_during_batch(work)
    batch_while_held(work, args.hold)


if __name__ == "__main__":
    main()
