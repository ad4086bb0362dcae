"""Benchmark: what Prefect costs a batch, against the least time the batch's calls allow.

A batch (default 10 topics x 4 sub-questions, the flows' defaults: 3 rounds, 6 pages per
sub-question, 2 waves) runs in web mode — the real openai SDK and the real serpapi client and
page fetcher — against loopback servers that answer after FIXED latencies (bench/overhead_rig.py:
300 ms per LLM call, 150 ms per search, 100 ms per page or robots.txt request; flags change
them). Each configuration runs in a fresh process with its own DuckDB file, Prefect home and
result storage, and topics of its own (their text carries a tag), so every cache starts cold:
Prefect's task results, our page and search caches. The loopback servers run in this process,
so their work does not compete with the measured one for its interpreter lock. It prints, side
by side:

- the BOUND: the least wall time any scheduler could reach with these latencies and this
  concurrency, from the calls the run actually made (the servers record each request with its
  topic and sub-question; the ledger (`ledger`) has role, topic and sub-question per call);
- measured wall time and measured / bound for (a) Prefect's ephemeral server (its start-up
  apart), (b) a running `prefect server start` on a free loopback port with its own
  PREFECT_HOME, started here, its database in SQLite, (b') the same with its database in a
  PostgreSQL started here (`server-pg`: Prefect's advice for concurrent runs; skipped without
  PostgreSQL's binaries), (c) the same core calls in plain Python threads, no Prefect
  (bench/overhead_plain.run_plain: the floor for our code without orchestration);
- per-task-run overhead: (wall with Prefect - wall in plain threads) / task runs (counted from
  the Prefect API), and where the time goes on the critical path (gaps between the calls of one
  researcher, topic lead-in, ...), from the servers' timestamps.

The bound (all CPU time counted as zero; L, S, P the LLM, search and page latencies):

    chain(sq)  = L x llm calls(sq) + S x searches(sq) + P x page requests(sq)
                 a researcher's rounds are strictly sequential (search -> choose -> read page
                 by page -> next queries ...), and its compression follows it;
    wave(w)    = max(longest chain of the wave, sum of its chains / W)
                 W = RESEARCHFLOW_MAX_SUBQUESTION_WORKERS researchers at once per topic;
    topic      = L x topic-level calls (plan, reviews, report) + sum of its waves
                 plan -> wave 1 -> review -> wave 2 -> report are sequential;
    batch      = max(longest topic, sum of topics / C, 2nd + 3rd... see `_batch_bound`)
                 C = topics at once (max_concurrency, RESEARCHFLOW_MAX_TOPIC_CONCURRENCY); a
                 topic holds its slot from its plan to its report;
    hosts      = max over sites of P x requests to it / RESEARCHFLOW_MAX_FETCHES_PER_HOST;
    BOUND      = max(batch, hosts).

Every term is a lower bound, so their maximum is one; it ignores robots.txt in the chains
(one request per site) and the DuckDB writes (CPU), so it is a little low, never high.

    python bench/overhead.py                      # 10 topics, all three configurations
    python bench/overhead.py --topics 4 --llm-ms 100 --only server plain
    python bench/overhead.py --root /tmp/ovh      # flows/tasks/core from another checkout
    python bench/overhead.py --only server --before /work/old   # old and new, one run, side by side
    python bench/overhead.py --py-spy /tmp/pyspy/bin/py-spy   # GIL samples of each process

It also prints each Prefect configuration's API traffic (requests by route, time waited, time
lost to the client's retry back-off on 503 "database is locked") and events, and CPU seconds of
the batch's process and of the server. The machine's load average is printed: other work on it
moves every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

from bench.overhead_bound import bound, calls_of, timeline  # noqa: E402

TARGET = 1.2
# configuration -> its topics' letter (and, with --before, the other checkout's letter)
MODES = {"ephemeral": "e", "server": "s", "server-pg": "g", "plain": "p"}
BEFORE = {"ephemeral": "f", "server": "b", "server-pg": "h", "plain": "q"}
SERVERS = ("server", "server-pg")
MODEL = "openai:gpt-4o-mini"


def _sibling(name: str, root: str | None = None):
    """bench/<name>.py by file, so a child whose flows come from --root still finds it; from
    `root` when that checkout has its own (the plain runner calls its core's functions)."""
    path = Path(root or "", "bench", f"{name}.py") if root else None
    if path is None or not path.is_file():
        path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _rig():
    return _sibling("overhead_rig")


# -- one configuration, in a child process -------------------------------------------------------

def child(spec: dict) -> None:
    root = spec["root"]
    sys.path[:0] = [root] if root != str(ROOT) else []
    os.environ.update(spec["env"])
    rig = _rig()
    from bench.workspace import workspace

    workspace(f"rf-bench-overhead-{spec['mode']}-")  # before Prefect is imported
    out: dict = {"mode": spec["mode"]}
    args = dict(csv_path=spec["csv"], batch_id=spec["batch"], model=MODEL, search="serpapi",
                db_path=spec["db"])
    if spec["mode"] == "plain":
        out["t0"], out["cpu0"] = time.monotonic(), rig.cpu()
        _sibling("overhead_plain", root).run_plain(**args, topic_workers=spec["topic_workers"],
                                                   subquestion_workers=spec["sq_workers"])
        out["t1"], out["cpu1"] = time.monotonic(), rig.cpu()
        out["state"] = "COMPLETED"
    else:
        from prefect import flow

        from flows.batch import research_batch

        api = rig.instrument()

        @flow(name="bench-warm-up")
        def warm_up() -> None:
            return None

        started = time.monotonic()
        warm_up()  # the ephemeral server starts here; a running one is only connected to
        out["startup"] = time.monotonic() - started
        api.on = True
        out["t0"], out["cpu0"] = time.monotonic(), rig.cpu()
        state = research_batch(**args, max_concurrency=spec["topic_workers"], return_state=True)
        out["t1"], out["cpu1"] = time.monotonic(), rig.cpu()
        api.on = False
        out["state"] = state.type.value
        out["api"] = api.snapshot()
        out["task_runs"] = _task_runs()
    print("@@RESULT " + json.dumps(out), flush=True)


def _task_runs() -> list[dict]:
    """Every task run the API knows (name, start, end, run time, its flow run), once the
    server's task-run recorder (which writes in batches) has caught up."""
    seen = -1
    while True:
        runs = _read_task_runs()
        if len(runs) == seen:
            return runs
        seen = len(runs)
        time.sleep(2.5)


def _read_task_runs() -> list[dict]:
    from prefect.client.orchestration import get_client

    runs, offset = [], 0
    with get_client(sync_client=True) as client:
        while True:
            page = client.read_task_runs(limit=200, offset=offset)
            runs += [{"name": r.name.split(":")[0].split(" ")[0] if r.name else "",
                      "key": r.task_key, "flow_run": str(r.flow_run_id),
                      "start": r.start_time.timestamp() if r.start_time else None,
                      "end": r.end_time.timestamp() if r.end_time else None,
                      "created": r.created.timestamp() if r.created else None,
                      "run_time": r.total_run_time.total_seconds()} for r in page]
            offset += len(page)
            if len(page) < 200:
                return runs


def launch(mode: str, spec: dict, log: Path) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    if spec.get("py_spy"):  # sample the child: collapsed stacks, one line per distinct stack
        cmd = [spec["py_spy"], "record", "--rate", "100", "--format", "raw", "--gil",
               "--output", str(log.with_suffix(".stacks")), "--"] + cmd
    with log.open("w") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=spec["root"])
    for line in done.stdout.splitlines():
        if line.startswith("@@RESULT "):
            return json.loads(line.removeprefix("@@RESULT "))
    raise RuntimeError(f"{mode}: no result (exit {done.returncode}); see {log}")


# -- running it all ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--llm-ms", type=float, default=300)
    parser.add_argument("--search-ms", type=float, default=150)
    parser.add_argument("--page-ms", type=float, default=100)
    parser.add_argument("--hosts", type=int, default=8, help="sites serving the pages")
    parser.add_argument("--topic-concurrency", type=int, help="default: settings (2)")
    parser.add_argument("--subquestion-workers", type=int, help="default: settings (4)")
    parser.add_argument("--per-host", type=int, help="fetches at once per site; default: 2")
    parser.add_argument("--only", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--py-spy", help="path of py-spy: sample each configuration's process")
    parser.add_argument("--root", default=str(ROOT), help="checkout whose flows/tasks/core run")
    parser.add_argument("--before", help="another checkout: each configuration runs from it as "
                                         "well, right after, in the same run (rows '... before')")
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return 0
    return run(args)


def run(args) -> int:
    import tempfile

    rig = _rig()
    from core.settings import Settings

    defaults = Settings.load()
    topic_workers = args.topic_concurrency or defaults.max_topic_concurrency
    sq_workers = args.subquestion_workers or defaults.max_subquestion_workers
    per_host = args.per_host or defaults.max_fetches_per_host
    lat = rig.Latency(args.llm_ms / 1000, args.search_ms / 1000, args.page_ms / 1000)
    work = Path(tempfile.mkdtemp(prefix="rf-bench-overhead-"))
    print(f"batch: {args.topics} topics, C={topic_workers} topics at once, W={sq_workers} "
          f"sub-questions at once, {per_host} fetches at once per site over {args.hosts} sites; "
          f"latencies LLM {args.llm_ms:.0f} ms, search {args.search_ms:.0f} ms, page "
          f"{args.page_ms:.0f} ms; code from {args.root}; work in {work}", flush=True)
    rows = {}
    if "server-pg" in args.only:
        from tests.fakes.postgres import pg_bin

        if pg_bin() is None:
            print("server-pg left out: no PostgreSQL binaries (initdb); apt-get install postgresql")
            args.only = [m for m in args.only if m != "server-pg"]
    with rig.serving(lat, args.hosts) as (env, recorder):
        env = {**env, "RESEARCHFLOW_MAX_SUBQUESTION_WORKERS": str(sq_workers),
               "RESEARCHFLOW_MAX_FETCHES_PER_HOST": str(per_host), "BENCH_VERBOSE": "1"}
        runs = [(mode, mode, args.root, MODES[mode]) for mode in args.only]
        if args.before:  # interleaved, so both see the same load on the machine
            runs = [r for mode, run in zip(args.only, runs) for r in
                    (run, (f"{mode} before", mode, args.before, BEFORE[mode]))]
        for label, mode, root, letter in runs:
            name = label.replace(" ", "-")
            csv = work / f"{name}.csv"
            csv.write_text("topic\n" + "".join(f"{rig.topic_text(letter, i)}\n"
                                               for i in range(args.topics)), encoding="utf-8")
            spec = {"mode": mode, "root": root, "csv": str(csv), "batch": f"ovh-{name}",
                    "db": str(work / f"{name}.duckdb"), "topic_workers": topic_workers,
                    "sq_workers": sq_workers, "py_spy": args.py_spy,
                    "env": {**env, "TMPDIR": str(work)}}
            mark = len(recorder.requests)
            server_start = None
            with contextlib.ExitStack() as stack:
                if mode in SERVERS:
                    started = time.monotonic()
                    server = stack.enter_context(_server(mode, work, name))
                    spec["env"]["PREFECT_API_URL"] = server.url
                    server_start = time.monotonic() - started
                before = rig.tree_cpu(server.process.pid) if mode in SERVERS else 0.0
                try:
                    result = launch(mode, spec, work / f"{name}.log")
                except RuntimeError as exc:  # one configuration lost, not the whole report
                    print(f"  {label}: left out: {exc}", file=sys.stderr, flush=True)
                    continue
                if mode in SERVERS:
                    result["server_cpu"] = rig.tree_cpu(server.process.pid) - before
            requests = recorder.since(mark)
            calls = rig_calls = calls_of(Path(spec["db"]), requests)
            result.update(bound=bound(calls, lat, topic_workers, sq_workers, per_host),
                          timeline=timeline(requests, result), calls=rig_calls,
                          requests=Counter(r.kind for r in requests), server_start=server_start,
                          slots=topic_workers, log=[list(vars(r).values()) for r in requests])
            rows[label] = result
            print(f"  {label}: {result['state']} in {result['t1'] - result['t0']:.1f} s "
                  f"(bound {result['bound']['bound']:.1f} s)", file=sys.stderr, flush=True)
    report(rows, lat, args.topics)
    print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}")
    if args.keep or args.py_spy:
        (work / "results.json").write_text(json.dumps(rows, default=str))  # a closer look
        print(f"kept {work} (logs, DuckDB files, results.json, stacks)")
    else:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(rows: dict, lat, n_topics: int) -> None:
    any_row = next(iter(rows.values()))
    counts = any_row["requests"]
    b = any_row["bound"]
    print(f"\ncalls per configuration: {counts['llm']} LLM, {counts['search']} searches, "
          f"{counts['page']} pages, {counts['robots']} robots.txt "
          f"(ledger rows {any_row['calls']['ledger_rows']} = LLM + searches: "
          f"{'yes' if any_row['calls']['ledger_rows'] == counts['llm'] + counts['search'] else 'NO'})")
    print(f"bound: {b['bound']:.1f} s = max(topic DAG on the slots {b['batch']:.1f} s, "
          f"busiest site {b['hosts']:.1f} s); a topic alone needs {b['topic_mean']:.2f} s")
    plain = rows.get("plain")
    print("\n| configuration | start-up s | wall s | bound s | wall / bound | task runs | "
          "flow runs | overhead per task run vs plain (ms) | CPU s: batch process (+ server) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, r in rows.items():
        wall = r["t1"] - r["t0"]
        runs = r.get("task_runs") or []
        task_runs = [t for t in runs if t["name"]]
        flows = len({t["flow_run"] for t in task_runs})
        start = r.get("startup")
        start_s = ("-" if start is None else f"{start:.1f}") + (
            f" (+ server {r['server_start']:.1f})" if r.get("server_start") else "")
        per_task = (f"{(wall - (plain['t1'] - plain['t0'])) / len(task_runs) * 1000:.0f}"
                    if plain and task_runs else "-")
        print(f"| {mode} | {start_s} | {wall:.1f} | {r['bound']['bound']:.1f} | "
              f"{wall / r['bound']['bound']:.2f}x | {len(task_runs) or '-'} | "
              f"{flows or '-'} | {per_task} | {r['cpu1'] - r['cpu0']:.1f}"
              + (f" (+ {r['server_cpu']:.1f})" if r.get("server_cpu") is not None else "") + " |")
    print("\n| configuration | lead-in s | tail s | topic span s (bound "
          f"{b['topic_mean']:.2f}) | gap between a researcher's calls ms (steps) |")
    print("|---|---|---|---|---|")
    for mode, r in rows.items():
        t = r["timeline"]
        print(f"| {mode} | {t['lead_in']:.2f} | {t['tail']:.2f} | {t['topic_span']:.2f} | "
              f"{t['step_gap'] * 1000:.0f} ({t['steps']}) |")
    for mode, r in rows.items():
        t, wall = r["timeline"], r["t1"] - r["t0"]
        slots = r["slots"]
        outside = (slots * wall - sum(t["spans"])) / len(t["spans"])
        print(f"topics, {mode}: outside its calls {outside:.2f} s per topic (C x wall - sum of "
              "spans, per topic); [first call, last call] s after start: " + " ".join(
                  f"[{a:.1f},{b:.1f}]" for a, b in t["windows"]))
    for mode, r in rows.items():
        phases = ", ".join(f"{k} {v[1] * 1000:.0f} ms" for k, v in sorted(r["timeline"]["phases"].items()))
        print(f"gaps at topic steps, {mode}: {phases}")
    for mode, r in rows.items():
        runs = [t for t in r.get("task_runs") or [] if t["name"] and t["start"] and t["end"]]
        if runs:
            by = defaultdict(list)
            for t in runs:  # a subflow's stand-in task run is named after its flow and id
                by["subflow" if t["name"].startswith("research-topic-") else t["name"]].append(t)
            print(f"task runs, {mode} (count, mean wall from start to end ms): " + ", ".join(
                f"{n} {len(v)} {statistics.mean(t['end'] - t['start'] for t in v) * 1000:.0f}"
                for n, v in sorted(by.items(), key=lambda kv: -len(kv[1]))))
    for mode, r in rows.items():
        api = r.get("api")
        if not api:
            continue
        routes = sorted(api["routes"].items(), key=lambda kv: -kv[1][1])
        total = sum(v[0] for k, v in routes if "(retried)" not in k)
        print(f"API, {mode}: {total} requests, {sum(v[1] for _, v in routes):.1f} s waited, "
              f"{sum(v[3] for _, v in routes):.1f} s of it in requests that were retried; "
              f"events {sum(api['events'].values())}")
        for name, (n, spent, statuses, slept) in routes[:12]:
            print(f"    {name}: {n} x, {spent:.2f} s ({spent / n * 1000:.0f} ms each), "
                  f"status {statuses}" + (f", {slept:.1f} s in retried requests" if slept else ""))
        print("    events: " + ", ".join(f"{k} {v}" for k, v in sorted(
            api["events"].items(), key=lambda kv: -kv[1])[:8]))
        if api.get("retried"):  # when the back-offs fell: the lead-in shows, the rest may hide
            print("    retried (s after start, for s): " + ", ".join(
                f"{route} {at - r['t0']:.1f}/{took:.1f}" for at, took, route in api["retried"]))
    for mode in rows:
        if mode.split(" ")[0] in SERVERS:
            server = rows[mode]
            ratio = (server["t1"] - server["t0"]) / server["bound"]["bound"]
            print(f"target: wall / bound <= {TARGET}x against a running server ({mode}): "
                  f"{'met' if ratio <= TARGET else 'NOT met'} ({ratio:.2f}x)")


@contextlib.contextmanager
def _server(mode: str, work: Path, name: str | None = None):
    """A running `prefect server start`: its database in SQLite (`server`), or in a PostgreSQL
    started here (`server-pg`, what Prefect advises for concurrent runs; the README says how)."""
    from tests.fakes.prefect_server import PrefectServer

    with contextlib.ExitStack() as stack:
        url = None
        if mode == "server-pg":
            from tests.fakes.postgres import Postgres, pg_bin

            pg = Postgres(pg_bin())
            pg.start()
            stack.callback(pg.stop)
            url = pg.sqlalchemy_url(pg.new_database())
        server = PrefectServer(work / f"prefect-{name or mode}", database_url=url)
        server.url = server.__enter__()
        stack.callback(server.__exit__, None, None, None)
        yield server


if __name__ == "__main__":
    sys.exit(main())
