"""The web layer through the real flows: two topics in web mode over a site full of traps.

The site (bench/web.py's, on loopback) has four articles (one also linked with tracking
parameters), a bloated page, a PDF, results naming loopback by other names (the stand-ins for
private and metadata addresses), and a hang and a redirect loop on hosts of their own. Over two
runs every distinct page must be fetched once, nothing private fetched or stored, the PDF's text
stored, the hang waited on twice at most (its timeout may pass: the read is tried once more,
then the host is skipped for the rest of the run), and every citation verbatim.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

from bench.web import ARTICLES, PDF_SENTENCE, TOPICS, Site, serving
from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_two_topics_fetch_each_page_once_and_nothing_private(monkeypatch, db_path):
    monkeypatch.setattr("bench.web.HANG_SECONDS", 6)
    site = Site()
    with serving(site) as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("RESEARCHFLOW_PAGE_DEADLINE", "2")
        started = time.monotonic()
        reports = []
        for topic in TOPICS:
            state = research_topic(topic=topic, batch_id="web", model="offline",
                                   search="serpapi", db_path=str(db_path),
                                   options=TopicOptions(max_pages=12), return_state=True)
            assert state.is_completed(), state.message
            reports.append(state.result())
        elapsed = time.monotonic() - started

    readable = [*ARTICLES, "/paper.pdf", "/bloated"]
    assert {p: site.requests[p] for p in readable} == {p: 1 for p in readable}
    assert site.requests["/secret"] == 0  # no private stand-in was ever requested
    assert site.requests["/hang"] == 2 and site.requests["/loop"] <= 1
    assert elapsed < 60

    _, sources = query_readonly(db_path, "SELECT url, text FROM sources")
    hosts = {urlsplit(u).hostname for u, _ in sources}
    assert hosts == {"127.0.0.1"}  # localhost and 127.0.0.2 results never stored
    urls = [u for u, _ in sources]
    assert len(urls) == len(set(urls)) and not any("utm_" in u or "#" in u for u in urls)
    assert any(PDF_SENTENCE in t for u, t in sources if u.endswith(".pdf"))

    _, pages = query_readonly(db_path, "SELECT status, count(*) FROM pages GROUP BY status")
    assert dict(pages)["ok"] >= len(ARTICLES) + 1  # the page cache holds every page read
    store = ResultStore(db_path)
    for report_id in reports:
        assert store.get_report(report_id)["citations"]
        assert store.unverified_citations(report_id) == []
