"""CorpusSearch on a real folder and a real DuckDB file: extraction, BM25, incremental index."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.models import SearchResult
from core.search.corpus import CorpusSearch
from core.search.registry import make_search
from tasks import contexts
from core.settings import Settings, run_config

HTML = """<!doctype html><html><head><title>Tea brewing guide</title></head><body>
<nav><a href="/">Home</a> <a href="/shop">Shop</a> <a href="/about">About us</a></nav>
<article><h1>How to brew green tea</h1>
<p>Green tea should be brewed with water at about 80 degrees Celsius for two to three minutes.
Boiling water scorches the leaves and makes the cup bitter.</p>
<p>Oolong tolerates hotter water and several short infusions from the same leaves.</p>
</article>
<footer>Copyright Teashop Ltd. All rights reserved. Cookie settings.</footer>
</body></html>"""

MD = """# Sourdough starter

A sourdough starter is a culture of wild yeast and lactic acid bacteria.
Feed the starter with equal weights of flour and water every day.

## Troubleshooting

A starter that smells of acetone is hungry: feed it more often.
"""

TXT = """Bicycle maintenance

Clean and lubricate the chain every few hundred kilometres. A dry chain wears the cassette
quickly and makes shifting noisy. Check tyre pressure weekly.
"""


def _long_doc() -> str:
    paragraphs = [f"Paragraph {i} talks about gardening, soil, compost and seasons. " * 6
                  for i in range(40)]
    paragraphs[25] = ("The rare quokka beetle lives only in compost heaps kept below ten "
                      "degrees, where it eats fungal threads.")
    return "Gardening almanac\n\n" + "\n\n".join(paragraphs)


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "tea.html").write_text(HTML, encoding="utf-8")
    (root / "sub" / "sourdough.md").write_text(MD, encoding="utf-8")
    (root / "sub" / "deeper" / "bike.txt").write_text(TXT, encoding="utf-8")
    (root / "garden.txt").write_text(_long_doc(), encoding="utf-8")
    (root / "ignored.xlsx").write_bytes(b"PK tea tea tea")  # not a corpus format
    (root / ".hidden").mkdir()
    (root / ".hidden" / "secret.md").write_text("# tea secret\ntea tea", encoding="utf-8")
    return root


@pytest.fixture()
def search(corpus: Path, tmp_path: Path):
    backend = CorpusSearch(corpus, tmp_path / "index" / "corpus.duckdb")
    yield backend
    backend.close()


def test_answers_as_a_search_backend_does(search: CorpusSearch) -> None:
    """What the research loop relies on (an isinstance check against the protocol only
    compared names): ranked results, each read back into a page about the query."""
    hits = search.search("tea", k=3)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1)) and hits
    for hit in hits:
        page = search.read(hit)
        assert page is not None and "tea" in page.text.lower()


def test_finds_each_format_with_title_and_file_url(search: CorpusSearch, corpus: Path) -> None:
    tea = search.search("green tea water temperature", k=3)
    assert tea and tea[0].url.startswith((corpus / "tea.html").as_uri() + "#p")
    assert tea[0].title in ("How to brew green tea", "Tea brewing guide")
    assert "80 degrees" in tea[0].snippet or "water" in tea[0].snippet.lower()
    assert search.search("sourdough starter acetone")[0].title == "Sourdough starter"
    bike = search.search("chain lubricate cassette")[0]
    assert bike.title == "Bicycle maintenance"
    assert bike.url.startswith((corpus / "sub" / "deeper" / "bike.txt").as_uri())


def test_html_boilerplate_is_not_indexed(search: CorpusSearch) -> None:
    assert search.search("cookie copyright rights reserved") == []
    assert search.search("pdf") == [] and search.search("secret") == []


def test_ranking_prefers_the_document_about_the_query(search: CorpusSearch) -> None:
    hits = search.search("compost", k=5)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert len({h.url.split("#")[0] for h in hits}) == len(hits)  # one hit per document
    # a term that occurs in one passage of one document ranks that passage first
    beetle = search.search("quokka beetle", k=3)
    assert len(beetle) == 1 and "quokka beetle" in beetle[0].snippet
    assert beetle[0].url.endswith("#p" + beetle[0].url.rsplit("#p", 1)[1])
    assert not beetle[0].url.endswith("#p0")  # the passage, not the start of the document


def test_snippet_and_quotes_are_verbatim_in_read_text(search: CorpusSearch) -> None:
    for query in ("quokka beetle compost", "boiling water bitter", "acetone hungry"):
        hit = search.search(query, k=1)[0]
        source = search.read(hit)
        assert source is not None and source.url == hit.url.split("#")[0]  # the whole document
        assert hit.snippet and hit.snippet in source.text
        assert len(hit.snippet) <= 300


def test_read_of_a_long_document_is_a_window_around_the_hit(corpus: Path, tmp_path: Path) -> None:
    small = CorpusSearch(corpus, tmp_path / "small.duckdb", read_chars=3000, passage_chars=800)
    hit = small.search("quokka beetle")[0]
    source = small.read(hit)
    full = (corpus / "garden.txt").read_text(encoding="utf-8")
    assert "quokka beetle" in source.text and source.text in full
    assert len(source.text) <= 3000 < len(full)
    assert source.url == hit.url  # a window keeps its passage anchor
    small.close()


def test_queries_are_sanitized(search: CorpusSearch) -> None:
    assert search.search("") == [] and search.search('  "" ** ;; ') == []
    assert search.search("tea'); DROP TABLE files; --")
    assert search.search("sourdough starter", k=3)  # index survived
    assert search.read(SearchResult(url="https://example.com/x", title="x")) is None
    assert search.read(SearchResult(url="file:///etc/passwd#p0", title="x")) is None


def test_incremental_reindex(corpus: Path, search: CorpusSearch) -> None:
    first = search.index()
    assert first.extracted == 4 and first.files == 4 and first.rebuilt
    again = search.index()
    assert (again.extracted, again.removed, again.rebuilt) == (0, 0, False)

    os.utime(corpus / "tea.html")  # touched, same content: no extraction
    assert search.index().extracted == 0

    (corpus / "sub" / "sourdough.md").write_text(MD + "\nRye flour makes a livelier starter.\n")
    changed = search.index()
    assert (changed.extracted, changed.rebuilt) == (1, True)
    assert "Rye flour" in search.search("rye livelier")[0].snippet

    (corpus / "sub" / "deeper" / "bike.txt").unlink()
    removed = search.index()
    assert (removed.extracted, removed.removed) == (0, 1)
    assert search.search("chain lubricate cassette") == []

    search.close()
    assert search.search("green tea")  # reopened after close
    # a fresh instance over the same index file reuses it without extracting anything
    search.close()
    reopened = CorpusSearch(corpus, search.index_path)
    assert reopened.index().extracted == 0
    assert reopened.search("green tea")
    reopened.close()
    print(f"\nfirst index {first.seconds * 1000:.1f} ms, unchanged re-index "
          f"{again.seconds * 1000:.1f} ms")


def test_concurrent_searches_share_one_index(search: CorpusSearch) -> None:
    errors: list[BaseException] = []
    found: list[int] = []

    def worker() -> None:
        try:
            for _ in range(20):
                found.append(len(search.search("tea sourdough chain compost", k=4)))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and found == [4] * 160
    assert search.last_stats is not None and search.last_stats.extracted == 4  # indexed once


def test_a_run_context_builds_one_corpus_backend_for_its_index(corpus: Path,
                                                                tmp_path: Path) -> None:
    settings = Settings(search="corpus", corpus_dir=corpus, cache_dir=tmp_path / "cache",
                        db_path=tmp_path / "s.duckdb", _env_file=None)
    context = contexts.context_for(run_config(settings))
    backend = context.search
    assert contexts.context_for(run_config(settings)).search is backend  # built once
    assert make_search(settings) is not backend  # the factory itself keeps nothing
    assert backend.search("green tea")[0].title
    assert str(backend.index_path).startswith(str((tmp_path / "cache" / "index").resolve()))
    contexts.close()  # closes the index too


HOLDER = """
import sys, time
from pathlib import Path
from core.search.corpus import CorpusSearch
backend = CorpusSearch(Path(sys.argv[1]), Path(sys.argv[2]))
print(len(backend.search("green tea")), flush=True)
sys.stdin.readline()  # hold the index open until told to stop
"""


def test_another_process_can_search_while_we_hold_the_index(corpus: Path,
                                                            search: CorpusSearch) -> None:
    assert search.search("green tea")  # we built it and hold a read-only connection
    root = Path(__file__).resolve().parents[2]
    other = subprocess.Popen([sys.executable, "-c", HOLDER, str(corpus), str(search.index_path)],
                             cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(root)})
    try:
        assert other.stdout.readline().strip() == "1"
        # while the other process reads, a change cannot be written: keep serving the old index
        (corpus / "tea.html").write_text(HTML.replace("Oolong", "Genmaicha"), encoding="utf-8")
        busy = search.index()
        assert busy.stale and busy.extracted == 0
        assert search.search("oolong") and not search.search("genmaicha")
    finally:
        other.communicate("stop\n", timeout=30)
    caught_up = search.index()
    assert caught_up.extracted == 1 and not caught_up.stale
    assert search.search("genmaicha")
