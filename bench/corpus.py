"""Corpus search at scale, before and after: indexing speed, memory, query latency and hits.

Writes a generated corpus (tests/fakes/generated_corpus.py: --pages HTML pages from word lists,
one in 20 in Chinese, one in 20 also saved as its .txt source) and runs, in a fresh process per
code version, the same steps on its own copy of that corpus:

  first build -> unchanged re-index -> one file changed -> 40 queries (30 English, 10 Chinese)

"after" is this working tree; "before" is the code at --before-ref (default 0bf3303, the corpus
as it was before hybrid ranking, CJK bigrams, parallel extraction and twin detection), checked out
with `git worktree add` into a temporary folder and removed afterwards. A fresh process per
version keeps imports, caches and memory high-water marks apart.

Printed side by side: pages/s per step (files looked at / seconds), peak RSS of the indexing
process and of its largest worker (getrusage RUSAGE_SELF and RUSAGE_CHILDREN: a high-water mark
each, workers are reaped when indexing ends), CPU seconds per step (this process's threads plus
reaped workers: less skewed by other work on a shared machine than wall time), query latency
p50/p95 (after one warm-up query, which also loads the embedder) and CPU per query, and hits: queries with any hit, and the share of top-5 hits in
the query's own topic folder. The machines are shared, so ratios mean more than seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make tests.fakes importable
    sys.path.insert(0, str(ROOT))


def queries(seed: int = 7) -> list[tuple[str, str, str]]:
    """(language, topic, query): 5 English queries per English topic, 10 Chinese in all."""
    from tests.fakes.generated_corpus import CHINESE, ENGLISH

    rng = random.Random(seed)
    out = []
    for topic, (nouns, verbs, adjectives) in sorted(ENGLISH.items()):
        for _ in range(5):
            out.append(("en", topic, f"how does a {rng.choice(adjectives)} {rng.choice(nouns)} "
                                     f"affect the {rng.choice(nouns)}"))
    zh = sorted(CHINESE.items())
    for i in range(10):
        topic, (nouns, verbs, _adjectives) = zh[i % len(zh)]
        out.append(("zh", topic, f"{rng.choice(nouns)}如何{rng.choice(verbs)}{rng.choice(nouns)}"))
    return out


# ---- one version, in its own process --------------------------------------------------------

def child(code_root: Path, corpus: Path, index: Path, victim: str,
          asked: list[tuple[str, str, str]]) -> dict:
    sys.path.insert(0, str(code_root))  # before anything imports core
    from core.search.corpus import CorpusSearch

    import core
    assert Path(core.__file__).resolve().is_relative_to(code_root.resolve()), core.__file__
    search = CorpusSearch(corpus, index)
    cpu: dict[str, float] = {}

    def step(name: str):
        began = _cpu()
        stats = search.index()
        cpu[name] = _cpu() - began
        return stats

    steps = {name: step(name) for name in ("first build", "unchanged re-index")}
    path = corpus / victim
    path.write_text(path.read_text(encoding="utf-8").replace(
        "</article>", "<p>One more generated sentence about the changed page.</p></article>"),
        encoding="utf-8")
    steps["one file changed"] = step("one file changed")
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss

    t0 = time.perf_counter()
    search.search(asked[0][2], k=5)  # warm-up: first cursor, and the embedder when there is one
    cold = time.perf_counter() - t0
    latencies: dict[str, list[float]] = {"en": [], "zh": []}
    query_cpu = {"en": 0.0, "zh": 0.0}
    answered = {"en": 0, "zh": 0}
    on_topic = {"en": [0, 0], "zh": [0, 0]}
    for language, topic, query in asked:
        t0, c0 = time.perf_counter(), time.process_time()
        hits = search.search(query, k=5)
        latencies[language].append(time.perf_counter() - t0)
        query_cpu[language] += time.process_time() - c0
        answered[language] += bool(hits)
        on_topic[language][0] += sum(f"/{topic}/page-" in h.url for h in hits)
        on_topic[language][1] += 5
    search.close()
    return {
        "steps": {name: {"files": s.files, "extracted": s.extracted, "rebuilt": s.rebuilt,
                         "seconds": s.seconds, "cpu": cpu[name],
                         "duplicates": getattr(s, "duplicates", None)}
                  for name, s in steps.items()},
        "rss_self_mb": self_rss / 1024, "rss_children_mb": children_rss / 1024,
        "cold_query_s": cold,
        "latency": {lang: sorted(v) for lang, v in latencies.items()},
        "query_cpu": {lang: query_cpu[lang] / max(1, len(v)) for lang, v in latencies.items()},
        "answered": answered, "asked": {lang: len(v) for lang, v in latencies.items()},
        "on_topic": {lang: a / b if b else 0.0 for lang, (a, b) in on_topic.items()},
        "index_mb": index.stat().st_size / 2**20,
    }


def _cpu() -> float:
    """CPU seconds of this process (all its threads) and of its reaped children (workers)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def run_version(code_root: Path, pages: int, workdir: Path) -> dict:
    from tests.fakes.generated_corpus import write_corpus

    corpus = workdir / "corpus"
    written = write_corpus(corpus, pages)
    victim = next(p.path for p in written if p.path.endswith(".html") and p.language == "en")
    # The queries travel as a file: the old tree has no tests/fakes/generated_corpus.py.
    (workdir / "queries.json").write_text(json.dumps(queries()), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(code_root), str(corpus),
         str(workdir / "index.duckdb"), victim, str(workdir / "queries.json")],
        check=True, capture_output=True, text=True, cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(code_root)})
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- report ---------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(
        values) > 1 else values[0]


def report(results: dict[str, dict], pages: int, generated_files: int) -> None:
    names = list(results)
    print(f"corpus: {pages} generated HTML pages + .txt copies = {generated_files} files "
          f"(1 in 20 Chinese, 1 in 20 also as .txt)")
    print(f"{'':<38}" + "".join(f"{n:>16}" for n in names) + (
        f"{'after/before':>14}" if len(names) == 2 else ""))

    def row(label: str, values: list[float], fmt: str, ratio: bool = True) -> None:
        cells = "".join(f"{format(v, fmt):>16}" for v in values)
        tail = ""
        if ratio and len(values) == 2 and values[0]:
            tail = f"{values[1] / values[0]:>13.2f}x"
        print(f"{label:<38}{cells}{tail}")

    for step in ("first build", "unchanged re-index", "one file changed"):
        s = [results[n]["steps"][step] for n in names]
        row(f"{step}: seconds", [x["seconds"] for x in s], ".3f")
        row(f"{step}: pages/s", [x["files"] / x["seconds"] for x in s], ",.0f")
        row(f"{step}: CPU s (self+workers)", [x["cpu"] for x in s], ".3f")
        row(f"{step}: files extracted", [x["extracted"] for x in s], "d", ratio=False)
    dup = [results[n]["steps"]["first build"]["duplicates"] for n in names]
    print(f"{'duplicates indexed once (twins)':<38}" + "".join(
        f"{('n/a' if d is None else d):>16}" for d in dup))
    row("index file, MB", [results[n]["index_mb"] for n in names], ".1f")
    row("peak RSS indexer (self), MB", [results[n]["rss_self_mb"] for n in names], ".0f")
    row("peak RSS largest worker, MB", [results[n]["rss_children_mb"] for n in names], ".0f",
        ratio=False)
    row("first query (cold), ms", [results[n]["cold_query_s"] * 1000 for n in names], ".1f")
    for lang, label in (("en", "English"), ("zh", "Chinese")):
        lat = [results[n]["latency"][lang] for n in names]
        row(f"{label} query p50, ms", [percentile(v, 50) * 1000 for v in lat], ".1f")
        row(f"{label} query p95, ms", [percentile(v, 95) * 1000 for v in lat], ".1f")
        row(f"{label} query CPU, ms (mean)", [results[n]["query_cpu"][lang] * 1000
                                              for n in names], ".1f")
        print(f"{label + ' queries with hits':<38}" + "".join(
            f"{results[n]['answered'][lang]:>13}/{results[n]['asked'][lang]:<2}" for n in names))
        row(f"{label} top-5 hits on topic", [results[n]["on_topic"][lang] for n in names],
            ".0%", ratio=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--before-ref", default="0bf3303")
    parser.add_argument("--no-before", action="store_true", help="measure this tree only")
    parser.add_argument("--child", nargs=5,
                        metavar=("ROOT", "CORPUS", "INDEX", "VICTIM", "QUERIES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        root, corpus, index, victim, asked = args.child
        print(json.dumps(child(Path(root), Path(corpus), Path(index), victim,
                               [tuple(q) for q in json.loads(Path(asked).read_text())])))
        return 0

    from tests.fakes.generated_corpus import write_corpus

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="rf-bench-corpus-") as tmp:
        tmp_path = Path(tmp)
        t0 = time.perf_counter()
        generated = len(write_corpus(tmp_path / "probe", args.pages))
        shutil.rmtree(tmp_path / "probe")
        print(f"generating the corpus takes {time.perf_counter() - t0:.1f} s "
              f"(done once per version, not timed below)", flush=True)
        if not args.no_before:
            before = tmp_path / "before-code"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach",
                            str(before), args.before_ref], check=True, capture_output=True)
            try:
                (tmp_path / "before").mkdir()
                results[f"before {args.before_ref}"] = run_version(before, args.pages,
                                                                   tmp_path / "before")
            finally:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(before)], check=False, capture_output=True)
                subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False,
                               capture_output=True)
        (tmp_path / "after").mkdir()
        results["after"] = run_version(ROOT, args.pages, tmp_path / "after")
    report(results, args.pages, generated)
    print(f"load average (1/5/15 min) at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
          f" on {os.cpu_count()} cores: other work on the machine skews seconds, not counts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
