"""The web layer through the real flows: two topics in web mode over a site full of traps.

The site (bench/web.py's, on loopback, pages through the real fetcher and trafilatura) has four
articles (one also linked with tracking parameters), a 6 MB page, a redirect to a private
address, a PDF, results naming the cloud-metadata address, loopback by other names and a file:
URL, and a hang and a redirect loop on hosts of their own. With `--max-pages` 6 the first six
results are traps but two. Over two runs (and a rerun of the first) every readable page listed
must be read by every sub-question and fetched exactly once, each refused page fetched once at
most, nothing private fetched or stored, the PDF's text stored, the hang waited on twice at
most (its timeout may pass: the read is tried once more, then the host is skipped for the rest
of the run), and every citation verbatim.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest

from bench.web import PDF_SENTENCE, READABLE, TOPICS, Site, reading, serving
from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

REFUSED = ("/bloated", "/go", "/loop")  # too large, redirected to a private address, a loop


def test_every_readable_page_is_read_once_and_no_refused_page_twice(monkeypatch, db_path):
    monkeypatch.setattr("bench.web.HANG_SECONDS", 6)
    site = Site()
    with serving(site) as env:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("RESEARCHFLOW_PAGE_DEADLINE", "2")
        site_url = "http://" + env["RESEARCHFLOW_FETCH_ALLOW_HOSTS"].split(",")[0]

        def run(topic: str) -> str:
            state = research_topic(topic=topic, batch_id="web", model="offline",
                                   search="serpapi", db_path=str(db_path),
                                   options=TopicOptions(max_pages=6), return_state=True)
            assert state.is_completed(), state.message
            return state.result()

        started = time.monotonic()
        reports = [run(topic) for topic in TOPICS]
        elapsed = time.monotonic() - started
        after_two = dict(site.requests)
        run(TOPICS[0])  # a rerun of the same edition: served from the caches

    assert {p: site.requests[p] for p in READABLE} == {p: 1 for p in READABLE}
    assert {p: site.requests[p] for p in REFUSED} == {p: 1 for p in REFUSED}
    assert site.requests["/secret"] == 0  # no private stand-in, nor the redirect's target
    assert site.requests["/hang"] <= 2
    assert dict(site.requests) == after_two  # the rerun fetched nothing at all
    assert elapsed < 90

    # Every sub-question read every readable page it was offered, within 2 x 6 attempts.
    per_subquestion = reading(db_path, site_url)
    assert {t for t, *_ in per_subquestion} == set(TOPICS)
    for topic, index, read, offered, tried in per_subquestion:
        assert (read, offered) == (len(READABLE), len(READABLE)), (topic, index)
        assert tried <= 12

    _, sources = query_readonly(db_path, "SELECT url, text FROM sources")
    hosts = {urlsplit(u).hostname for u, _ in sources}
    assert hosts == {"127.0.0.1"}  # localhost and 127.0.0.2 results never stored
    urls = [u for u, _ in sources]
    assert len(urls) == len(set(urls)) and not any("utm_" in u or "#" in u for u in urls)
    assert sorted(urlsplit(u).path for u in urls) == sorted(READABLE)
    assert any(PDF_SENTENCE in t for u, t in sources if u.endswith(".pdf"))

    store = ResultStore(db_path)
    for report_id in reports:
        assert store.get_report(report_id)["citations"]
        assert store.unverified_citations(report_id) == []
