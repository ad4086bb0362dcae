"""Benchmark: one CSV batch on threads, on 1 and on 2 Dask worker processes, into a DuckLake.

A batch of 12 topics (4 sub-questions, 1 round, 3 pages, 1 wave each by default) runs in web
mode, the real openai SDK, serpapi client and page fetcher, against the loopback servers of
bench/overhead_rig.py, which answer after FIXED latencies (300 ms per LLM call, 150 ms per
search, 100 ms per page). Each configuration runs in a fresh process with its own Prefect API
(`researchflow`'s local server), Prefect home, cache and topics (their text carries a tag, so
every cache starts cold), and writes into its own DuckLake whose catalog is a PostgreSQL started
here (skipped without PostgreSQL's binaries: the bench says so and exits 0):

    threads   the flows' default: sub-question tasks in threads of the batch's process
    dask-1    RESEARCHFLOW_TASK_RUNNER=dask on a LocalCluster of 1 worker process (4 threads)
    dask-2    on 2 worker processes (2 threads each): the same 4 researchers at once

It prints, side by side: wall time, the critical-path BOUND (bench/overhead_bound.py: the
least time any scheduler could reach with these latencies and concurrency, from the calls the
run made) and wall / bound; DuckLake commits and commit conflicts retried (the batch's process
and every worker); rows stored (topics, reports, sub-questions, findings, citations, sources,
ledger rows) and rows stored more than once under one key (target 0); provider calls made
against ledger rows booked. On a 2-core machine shared with other work the Dask figures say what the
processes cost, not what more machines would gain: the point of Dask is workers on other
machines. The machine's load average is printed beside the figures.

    python bench/scale.py                      # 12 topics, threads, dask-1, dask-2
    python bench/scale.py --topics 4 --only threads dask-2 --llm-ms 100

`--pacing` runs bench/scale_pacing.py instead: one provider's cap and a 429's pause across two
Dask workers, each worker's own gate against the one a Prefect server holds for both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

MODES = {"threads": ("t", 0), "dask-1": ("o", 1), "dask-2": ("w", 2)}  # letter, processes
MODEL = "openai:gpt-4o-mini"
SUBQUESTION_WORKERS = 4
TOPIC_CONCURRENCY = 2
PER_HOST = 2


# -- one configuration, in a child process -------------------------------------------------------

def child(spec: dict) -> None:
    os.environ.update(spec["env"])
    from bench.workspace import workspace

    workspace(f"rf-bench-scale-{spec['mode']}-")  # before Prefect is imported
    from flows.local_api import ensure_api

    ensure_api(timeout=600)  # a server the Dask workers reach too (they inherit its URL)
    cluster = None
    if spec["processes"]:
        import distributed

        cluster = distributed.LocalCluster(
            n_workers=spec["processes"], processes=True, dashboard_address=":0",
            threads_per_worker=SUBQUESTION_WORKERS // spec["processes"])
        os.environ.update(RESEARCHFLOW_TASK_RUNNER="dask",
                          RESEARCHFLOW_DASK_ADDRESS=cluster.scheduler_address)
    from flows.batch import research_batch

    started = time.monotonic()
    state = research_batch(csv_path=spec["csv"], batch_id=spec["batch"], model=MODEL,
                           search="serpapi", db_path=spec["db"],
                           max_concurrency=TOPIC_CONCURRENCY, return_state=True)
    out = {"mode": spec["mode"], "wall": time.monotonic() - started,
           "state": state.type.value, "lake": [_lake_counts()]}
    if cluster is not None:
        import distributed

        with distributed.Client(cluster) as client:
            out["lake"] += list(client.run(_lake_counts).values())
        cluster.close()
    print("@@RESULT " + json.dumps(out), flush=True)


def _lake_counts() -> tuple[int, int]:
    """(commits, conflicts retried) of every lake this process opened."""
    from core.store import lake

    backends = list(lake._BACKENDS.values())
    return sum(b.commits for b in backends), sum(b.conflicts for b in backends)


def launch(spec: dict, log: Path) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    with log.open("w") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    for line in done.stdout.splitlines():
        if line.startswith("@@RESULT "):
            return json.loads(line.removeprefix("@@RESULT "))
    raise RuntimeError(f"{spec['mode']}: no result (exit {done.returncode}); see {log}")


# -- what a run stored, and what it called ------------------------------------------------------

TABLES = ("topics", "reports", "subquestions", "findings", "citations", "sources", "ledger")
def _keys() -> dict[str, str]:
    from core.store import lake

    return {table: ", ".join(key) for table, key in lake.lake_schema().keys.items()}


def stored(target: str, batch: str) -> dict:
    from core.store import query_readonly

    rows, twice = {}, 0
    for table in TABLES:
        _, got = query_readonly(target, f"SELECT count(*) FROM {table}")
        rows[table] = got[0][0]
    for table, key in _keys().items():
        _, got = query_readonly(target, f"SELECT count(*) - count(DISTINCT ({key})) FROM {table}")
        twice += got[0][0]
    _, llm = query_readonly(target, "SELECT count(*) FROM ledger WHERE provider <> 'serpapi'")
    rows["llm"] = llm[0][0]
    _, done = query_readonly(target, "SELECT count(*) FROM topics WHERE batch_id = ? AND "
                                     "status = 'succeeded'", [batch])
    return {"rows": rows, "twice": twice, "succeeded": done[0][0], "llm": rows.pop("llm")}


def calls(target: str, requests: list) -> dict:
    """bench/overhead_bound.calls_of, read from any store (a lake too)."""
    from collections import Counter

    from bench.overhead_rig import TAG, sq_hash
    from core.store import query_readonly

    _, topics_rows = query_readonly(target, "SELECT topic_id, topic FROM topics")
    tags = {tid: TAG.search(text).group(0) for tid, text in topics_rows}
    _, sq_rows = query_readonly(target, "SELECT topic_id, idx, question, wave FROM subquestions")
    _, rows = query_readonly(target, "SELECT topic_id, subquestion_index, provider FROM "
                                     "ledger WHERE outcome = 'ok'")
    pages = Counter((r.tag, r.sq) for r in requests if r.kind == "page")
    topics: dict = {tid: {"tag": t, "llm": 0, "sqs": {}} for tid, t in tags.items()}
    for tid, idx, question, wave in sq_rows:
        topics[tid]["sqs"][idx] = {"wave": wave, "llm": 0, "search": 0,
                                   "page": pages[(tags[tid], sq_hash(question))]}
    for tid, idx, provider in rows:
        if idx is None:
            topics[tid]["llm"] += provider != "serpapi"
        else:
            topics[tid]["sqs"][idx]["search" if provider == "serpapi" else "llm"] += 1
    hosts = Counter(r.host for r in requests if r.kind in ("page", "robots"))
    return {"topics": topics, "hosts": hosts}


# -- running it all ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topics", type=int, default=12)
    parser.add_argument("--subquestions", type=int, default=4)
    parser.add_argument("--llm-ms", type=float, default=300)
    parser.add_argument("--search-ms", type=float, default=150)
    parser.add_argument("--page-ms", type=float, default=100)
    parser.add_argument("--hosts", type=int, default=8, help="sites serving the pages")
    parser.add_argument("--only", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--pacing", action="store_true",
                        help="the shared provider limits instead (bench/scale_pacing.py)")
    args, rest = parser.parse_known_args(argv)
    if args.pacing:
        from bench.scale_pacing import main as pacing

        return pacing(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.child:
        child(json.loads(args.child))
        return 0
    return run(args)


def run(args) -> int:
    from bench.overhead_bound import bound
    from bench.overhead_rig import Latency, serving, topic_text
    from tests.fakes.postgres import Postgres, pg_bin

    bin_dir = pg_bin()
    if bin_dir is None:
        print("scale: skipped, no PostgreSQL server binaries (initdb) for the DuckLake's "
              "catalog; apt-get install postgresql")
        return 0
    latency = Latency(args.llm_ms / 1000, args.search_ms / 1000, args.page_ms / 1000)
    work = Path(tempfile.mkdtemp(prefix="rf-bench-scale-"))
    postgres = Postgres(bin_dir)
    postgres.start()
    results = {}
    try:
        with serving(latency, args.hosts) as (env, recorder):
            for mode in args.only:
                letter, processes = MODES[mode]
                csv = work / f"{mode}.csv"
                csv.write_text("topic,max_subquestions,max_rounds,max_pages,max_waves\n" + "".join(
                    f'"{topic_text(letter, i)}",{args.subquestions},1,3,1\n'
                    for i in range(args.topics)), encoding="utf-8")
                target, data = postgres.new_lake(work)
                spec = {"mode": mode, "processes": processes, "csv": str(csv), "batch": mode,
                        "db": target, "env": {**env, "RESEARCHFLOW_LAKE_DATA_PATH": data,
                                              "RESEARCHFLOW_MAX_SUBQUESTION_WORKERS":
                                                  str(SUBQUESTION_WORKERS),
                                              "RESEARCHFLOW_MAX_FETCHES_PER_HOST": str(PER_HOST),
                                              "PYTHONPATH": str(ROOT)}}
                mark = len(recorder.requests)
                print(f"{mode}: running {args.topics} topics ...", flush=True)
                result = launch(spec, work / f"{mode}.log")
                requests = recorder.since(mark)
                result["bound"] = bound(calls(target, requests), latency, TOPIC_CONCURRENCY,
                                        SUBQUESTION_WORKERS, PER_HOST)["bound"]
                result["stored"] = stored(target, mode)
                result["ledger"] = sum(r.kind == "llm" for r in requests)
                results[mode] = result
    finally:
        postgres.stop()
    report(results, args)
    bad = [m for m, r in results.items()
           if r["state"] != "COMPLETED" or r["stored"]["twice"]
           or r["stored"]["succeeded"] != args.topics]
    return 1 if bad else 0


def report(results: dict, args) -> None:
    print(f"\n{args.topics} topics x {args.subquestions} sub-questions, web mode, "
          f"LLM {args.llm_ms:.0f} ms / search {args.search_ms:.0f} ms / page "
          f"{args.page_ms:.0f} ms, {TOPIC_CONCURRENCY} topics and {SUBQUESTION_WORKERS} "
          f"researchers at once; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "cores\n")
    head = f"{'':<28}" + "".join(f"{m:>12}" for m in results)
    print(head)

    def line(label: str, values) -> None:
        print(f"{label:<28}" + "".join(f"{v:>12}" for v in values))

    rs = list(results.values())
    line("batch state", [r["state"].lower() for r in rs])
    line("wall time (s)", [f"{r['wall']:.1f}" for r in rs])
    line("critical-path bound (s)", [f"{r['bound']:.1f}" for r in rs])
    line("wall / bound", [f"{r['wall'] / r['bound']:.2f}" for r in rs])
    line("lake commits", [sum(c for c, _ in r["lake"]) for r in rs])
    line("lake conflicts retried", [sum(k for _, k in r["lake"]) for r in rs])
    line("processes writing", [len(r["lake"]) for r in rs])
    line("topics succeeded", [f"{r['stored']['succeeded']}/{args.topics}" for r in rs])
    for table in TABLES:
        line(f"rows: {table}", [r["stored"]["rows"][table] for r in rs])
    line("rows stored twice", [r["stored"]["twice"] for r in rs])
    line("provider calls (LLM)", [r["ledger"] for r in rs])
    line("ledger rows (LLM)", [r["stored"]["llm"] for r in rs])


if __name__ == "__main__":
    sys.exit(main())
