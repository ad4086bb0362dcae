"""What bench/overhead.py compares against: the least wall time a batch's calls allow, and where a
measured run's time went, both read off the loopback servers' request logs and the ledger.
(The model is in bench/overhead.py's docstring.)"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from pathlib import Path


# -- the bound ---------------------------------------------------------------------------------

def calls_of(db: Path, requests: list) -> dict:
    """What the run did, per topic and sub-question, from the ledger and the servers."""
    import duckdb

    from overhead_rig import TAG, sq_hash

    con = duckdb.connect(str(db), read_only=True)
    tags = {tid: TAG.search(text).group(0) for tid, text in
            con.execute("SELECT topic_id, topic FROM topics").fetchall()}
    sqs = {(tid, idx): (sq_hash(q), wave) for tid, idx, q, wave in
           con.execute("SELECT topic_id, idx, question, wave FROM subquestions").fetchall()}
    rows = con.execute("SELECT topic_id, subquestion_index, provider FROM ledger "
                       "WHERE outcome = 'ok'").fetchall()
    con.close()
    pages = Counter((r.tag, r.sq) for r in requests if r.kind == "page")
    topics: dict = {tid: {"tag": t, "llm": 0, "sqs": {}} for tid, t in tags.items()}
    for (tid, idx), (h, wave) in sqs.items():
        topics[tid]["sqs"][idx] = {"wave": wave, "llm": 0, "search": 0,
                                   "page": pages[(tags[tid], h)]}
    for tid, idx, provider in rows:
        if idx is None:
            topics[tid]["llm"] += provider != "serpapi"
        else:
            topics[tid]["sqs"][idx]["search" if provider == "serpapi" else "llm"] += 1
    hosts = Counter(r.host for r in requests if r.kind in ("page", "robots"))
    return {"topics": topics, "hosts": hosts, "ledger_rows": len(rows)}


def _batch_bound(lengths: list[float], slots: int) -> float:
    """Least makespan of jobs on `slots` machines, lower bound: the longest job; the total over
    the slots; and with more jobs than slots, two of the slots+1 longest share a machine."""
    ordered = sorted(lengths, reverse=True)
    pair = ordered[slots - 1] + ordered[slots] if len(ordered) > slots else 0.0
    return max(ordered[0], sum(ordered) / slots, pair)


def bound(calls: dict, lat, topic_workers: int, sq_workers: int, per_host: int) -> dict:
    lengths = []
    for topic in calls["topics"].values():
        waves = defaultdict(list)
        for sq in topic["sqs"].values():
            waves[sq["wave"]].append(lat.llm * sq["llm"] + lat.search * sq["search"]
                                     + lat.page * sq["page"])
        span = lat.llm * topic["llm"] + sum(max(max(c), sum(c) / sq_workers)
                                            for c in waves.values())
        lengths.append(span)
        topic["span"] = span
    dag = _batch_bound(lengths, topic_workers)
    hosts = max(lat.page * n / per_host for n in calls["hosts"].values())
    return {"batch": dag, "hosts": hosts, "bound": max(dag, hosts),
            "topic_mean": statistics.mean(lengths)}


# -- where the time goes, from the servers' clocks ----------------------------------------------

def timeline(requests: list, result: dict) -> dict:
    """Gaps between the calls of one researcher (time no request of it was in flight), the
    lead-in before the first call and the tail after the last, and the topic spans."""
    chains, topics = defaultdict(list), defaultdict(list)
    for r in requests:
        if r.tag:
            topics[r.tag].append(r)
            if r.sq:
                chains[(r.tag, r.sq)].append(r)
    gaps = []
    for chain in chains.values():
        chain.sort(key=lambda r: r.start)
        gaps += [max(0.0, b.start - a.end) for a, b in zip(chain, chain[1:])]
    spans = [max(r.end for r in rs) - min(r.start for r in rs) for rs in topics.values()]
    phase = defaultdict(list)  # topic-level transitions: plan -> wave, wave -> review, ...
    for rs in topics.values():
        rs.sort(key=lambda r: r.start)
        for a, b in zip(rs, rs[1:]):
            if (a.role in ("plan", "review", "report") or b.role in ("plan", "review", "report")
                    or b.role == "compress" or a.role == "compress") and b.start > a.end:
                key = f"{a.role or a.kind} -> {b.role or b.kind}"
                phase[key].append(b.start - max(x.end for x in rs if x.start <= a.start))
    windows = sorted((min(r.start for r in rs) - result["t0"], max(r.end for r in rs) - result["t0"])
                     for rs in topics.values())
    first = min(r.start for r in requests)
    last = max(r.end for r in requests)
    return {"step_gap": statistics.mean(gaps) if gaps else 0.0, "steps": len(gaps),
            "chain_gap_total": sum(gaps), "lead_in": first - result["t0"],
            "tail": result["t1"] - last, "topic_span": statistics.mean(spans),
            "windows": windows, "spans": spans,
            "phases": {k: (len(v), statistics.mean(v)) for k, v in phase.items() if len(v) > 1}}
