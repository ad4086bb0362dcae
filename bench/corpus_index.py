"""Corpus indexing benchmark: first build vs. re-index of an unchanged corpus vs. one changed file.

Runs on the bundled CPython documentation corpus in a throwaway cache, all three side by side in
one run, and prints the ratios (the machines are shared, so absolute seconds are only context).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.search.corpus import CorpusSearch  # noqa: E402
from core.search.pydocs import materialize_pydocs  # noqa: E402


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rf-bench-") as tmp:
        t0 = time.perf_counter()
        corpus = materialize_pydocs(Path(tmp) / "corpus")
        materialize = time.perf_counter() - t0
        search = CorpusSearch(corpus, Path(tmp) / "index.duckdb")
        first = search.index()
        again = search.index()
        victim = sorted(corpus.rglob("*.md"))[0]
        victim.write_text(victim.read_text(encoding="utf-8") + "\n\nOne more sentence here.\n",
                          encoding="utf-8")
        one = search.index()
        t0 = time.perf_counter()
        queries = ["asyncio event loop", "thread lock", "json encoder", "garbage collection",
                   "pickle protocol", "process pool"] * 5
        hits = sum(len(search.search(q, k=5)) for q in queries)
        per_query = (time.perf_counter() - t0) / len(queries)
        search.close()

    print(f"corpus: {first.files} files (materialised in {materialize:.2f} s)")
    print(f"{'step':<26}{'files extracted':>16}{'index rebuilt':>15}{'seconds':>10}{'vs first':>10}")
    for name, s in (("first build", first), ("unchanged re-index", again),
                    ("one file changed", one)):
        print(f"{name:<26}{s.extracted:>16}{str(s.rebuilt):>15}{s.seconds:>10.3f}"
              f"{s.seconds / first.seconds:>10.1%}")
    print(f"search: {per_query * 1000:.1f} ms per query over {len(queries)} queries, {hits} hits")
    ok = again.extracted == 0 and not again.rebuilt and again.seconds < 0.1 * first.seconds
    print(f"unchanged re-index costs almost nothing (0 files, < 10% of first build): "
          f"{'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
