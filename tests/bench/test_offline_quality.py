"""bench/offline_quality.py measures from outside the engine: its rules on hand-made cases, and
the SQLAlchemy docs corpus it builds (pages with titles and prose, not reStructuredText)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.docs_corpus import write_docs_corpus
from bench.offline_quality import (Case, cases_for, document_text, is_verbatim, names_subject,
                                   subject_terms, summary_line)


def test_verbatim_reads_the_file_its_url_names_ignoring_layout_only(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("<html><head><style>p{}</style></head><body><h1>Locks</h1>\n<p>SQLite "
                    "allows one\n  writer at a time &amp; many readers.</p><ul><li>WAL helps."
                    "</li></ul><pre>x - y</pre></body></html>", encoding="utf-8")
    url = page.as_uri() + "#p0"
    docs: dict[str, str] = {}
    assert "p{}" not in document_text(page)
    assert is_verbatim("SQLite allows one writer at a time & many readers.", url, docs)
    assert is_verbatim("many readers.\n- WAL helps.", url, docs)  # a list item's marker
    assert is_verbatim("x - y", url, docs)  # a dash the page wrote
    assert not is_verbatim("SQLite allows two writers at a time", url, docs)
    assert not is_verbatim("", url, docs)
    assert not is_verbatim("SQLite allows one", "https://example.com/page.html", docs)
    assert not is_verbatim("SQLite allows one", (tmp_path / "gone.html").as_uri(), docs)


def test_on_subject_matches_latin_terms_at_a_word_start_and_chinese_anywhere() -> None:
    terms = ("thread", "gc", "PostgreSQL")
    assert names_subject("Threads share memory.", terms)
    assert names_subject("gc.collect() runs a full collection", terms)
    assert not names_subject("The bgcolor attribute", terms)  # not at a word start
    assert names_subject("它的行级锁让 PostgreSQL 并发写入", terms)
    assert names_subject("开启 WAL 模式", ("WAL",)) and names_subject("预写日志", ("预写日志",))
    assert not names_subject("它的行级锁让并发写入可以并行进行。", ("SQLite", "PostgreSQL"))
    fallback = subject_terms(Case("x", "Which should I use for caching: Redis or memcached?", ()))
    assert fallback == ("caching", "Redis", "memcached")


def test_summary_line_is_the_first_prose_under_the_first_section() -> None:
    markdown = ("# Title\n\n> notice\n\n**Topic:** t\n\n## 摘要\n\n| a | b |\n\n"
                "First line [1].\nSecond.\n\n## Next\n\nOther.")
    assert summary_line(markdown) == "First line [1]."
    assert summary_line("# Title\n\n## Summary\n\n## Next\n\ntext") == ""


def test_the_example_topics_all_have_subject_terms() -> None:
    for corpus in ("sqlalchemy", "zh", "pydocs"):
        cases = cases_for(corpus)
        assert cases and all(c.subject for c in cases), corpus
    assert any(re.search(r"[\u4e00-\u9fff]", c.topic) for c in cases_for("zh"))


def test_docs_corpus_renders_dialect_sections_as_readable_pages(tmp_path: Path) -> None:
    pages = write_docs_corpus(tmp_path)
    titles = {re.search(r"<title>(.*?)</title>", p.read_text(encoding="utf-8")).group(1)
              for p in pages}
    assert len(pages) > 50
    assert any(t.startswith("SQLite: ") and "Transaction" in t for t in titles)
    assert any(t.startswith("PostgreSQL: ") and "Isolation" in t for t in titles)
    text = "\n".join(document_text(p) for p in pages)
    assert ":class:`" not in text and "``" not in text and ".. seealso::" not in text
    assert "SQLite" in text and "PostgreSQL" in text
