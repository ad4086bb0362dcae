"""Exporting a report: markdown as stored, and an HTML page that is self-contained, links its
citations and references, and turns hostile text from web pages into inert text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.reports.export import is_web_url, render, to_html, to_markdown
from core.models import Citation, Report, Source
from core.store import ResultStore, StoreError
from core.store.connection import release_all
from core.store.query import read_report
from tests.core.test_store_views import cite, topic_result

HOSTILE = """# Hostile <em>title</em>

## Summary

Writers take a lock [1][2] and readers wait [3]. <script>alert('body')</script>
[click](javascript:alert(1)) and [docs](https://duckdb.org/docs) \\[2\\] [7]

| claim | refs |
|---|---|
| one writer | [1] |

![tracker](https://tracker.example/pixel.png)

## References

1. [Locks](https://example.org/locks) — “exclusive lock”
"""


def hostile_report() -> Report:
    return Report(
        report_id="r_hostile", topic="locks", title="Locks <b>& co</b>", markdown=HOSTILE,
        engine="offline", language="en", citations=(
            Citation(number=1, url="https://example.org/locks?a=1&b=2", title="Locks <i>",
                     quote="exclusive <script>alert('quote')</script> lock"),
            Citation(number=2, url="javascript:alert(document.cookie)", title="Evil",
                     quote="q2"),
            Citation(number=3, url="file:///etc/passwd", title="Local", quote="")))


def test_markdown_is_the_stored_markdown() -> None:
    report = hostile_report()
    assert to_markdown(report) == render(report, "md") == HOSTILE


def test_html_is_one_self_contained_page() -> None:
    page = render(hostile_report(), "html")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<style>" in page and "default-src 'none'" in page
    for fetched in ("<script", "<img", "<link", "<iframe", "src=", "@import", "url("):
        assert fetched not in page.lower()
    # Every href points inside the page or at an http(s) page a reader may open.
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(h.startswith(("#ref-", "https://", "http://")) for h in hrefs)


def test_citation_markers_link_to_their_references() -> None:
    page = to_html(hostile_report())
    for n in (1, 2, 3):
        assert f'<a href="#ref-{n}" class="cite">[{n}]</a>' in page
        assert f'<li id="ref-{n}" value="{n}">' in page
    assert page.count('href="#ref-1"') == 2  # in the prose and in the table
    assert "[7]" in page and 'href="#ref-7"' not in page  # no such citation
    assert page.count('href="#ref-2"') == 1  # the escaped \[2\] stays text
    # The references are rebuilt from the citations, once.
    assert page.count("<h2>References</h2>") == 1 and "“exclusive lock”" not in page


def test_hostile_text_comes_out_as_text() -> None:
    page = to_html(hostile_report())
    assert "exclusive &lt;script&gt;alert(&#x27;quote&#x27;)&lt;/script&gt; lock" in page
    assert "&lt;script&gt;alert('body')&lt;/script&gt;" in page
    assert "<title>Locks &lt;b&gt;&amp; co&lt;/b&gt;</title>" in page
    assert "Hostile &lt;em&gt;title&lt;/em&gt;" in page
    assert "<em>" not in page and "<b>" not in page


def test_only_http_urls_become_links() -> None:
    page = to_html(hostile_report())
    assert ('<a href="https://example.org/locks?a=1&amp;b=2" rel="noopener noreferrer">'
            "Locks &lt;i&gt;</a>") in page
    assert '<a href="https://duckdb.org/docs" rel="noopener noreferrer">docs</a>' in page
    assert "javascript:" in page and not re.search(r'href="\s*javascript:', page)
    assert "<span>Evil</span>" in page and "<span>Local</span>" in page
    # A local file outside any corpus folder is named by its file name, never linked.
    assert '<span class="url">passwd</span>' in page and "file:" not in page
    assert "[click](javascript:alert(1))" in page  # the markdown link stays as it was written
    # An image is a link to it, never fetched.
    assert '<a href="https://tracker.example/pixel.png" rel="noopener noreferrer">tracker</a>' \
        in page
    assert [is_web_url(u) for u in ("https://a.b/c", "HTTP://a.b", "ftp://a.b", "https:///x",
                                    "javascript:alert(1)", "data:text/html,x")] == [
        True, True, False, False, False, False]


def test_a_report_without_citations_keeps_its_own_references_section() -> None:
    report = Report(report_id="r_x", topic="t", title="T", markdown="# T\n\nBody.\n\n"
                    "## References\n\n[insufficient evidence]\n", citations=(), engine="offline")
    page = to_html(report)
    assert "<h2>References</h2>" in page and "[insufficient evidence]" in page
    assert 'id="references"' not in page


def test_a_chinese_report_keeps_one_references_section_with_linked_citations() -> None:
    report = Report(report_id="r_zh", topic="并发写入", title="研究报告", engine="offline",
                    language="zh", markdown="# 研究报告\n\n## 摘要\n\n写入者持有锁。[1]\n\n"
                    "## 参考文献\n\n1. [锁](https://example.org/locks) — “写入者持有锁”\n",
                    citations=(Citation(number=1, url="https://example.org/locks", title="锁",
                                        quote="写入者持有锁"),))
    page = to_html(report)
    assert page.count("<h2>参考文献</h2>") == 1 and "References" not in page
    assert '<a href="#ref-1" class="cite">[1]</a>' in page and 'id="ref-1"' in page
    assert '<html lang="zh">' in page


def test_a_stored_report_exports_read_only(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "rf.duckdb")
    page = Source(url="https://example.org/p", title="P", text="<script>x</script> quoted")
    report_id = store.save_result(topic_result(
        "Export me", body="Claim [1].", language="de", sources=(page,),
        citations=(cite(1, page, "<script>x</script> quoted"),)), run_id="r1", engine="offline")
    release_all()  # the writer's held connection checkpoints when it closes: not the export's
    before = store.path.read_bytes()

    report = read_report(store.path, report_id)
    assert report is not None and report.language == "de"
    assert [(c.number, c.quote) for c in report.citations] == [(1, "<script>x</script> quoted")]
    html = to_html(report)
    assert '<html lang="de">' in html and "<script" not in html
    assert read_report(store.path, "r_missing") is None
    assert store.path.read_bytes() == before
    with pytest.raises(StoreError, match="no researchflow store"):
        read_report(tmp_path / "none.duckdb", report_id)
