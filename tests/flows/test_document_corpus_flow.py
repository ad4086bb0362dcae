"""A corpus of a Word document and a PDF, researched by the offline engine end to end.

Both are cited, every quote is verbatim in the text stored for its source, and the PDF's
citations name their page (`#page=N` in the cited URL, whose stored source is that page).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from tests.fakes.documents import write_docx, write_pdf

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]


def test_docx_and_pdf_are_both_cited_verbatim(tmp_path: Path, db_path: Path) -> None:
    corpus = tmp_path / "office"
    corpus.mkdir()
    write_pdf(corpus / "threads.pdf", "Threads handbook", [
        "Threads handbook. Threads share the memory of one process.",
        "Threading suits waiting on sockets: a thread that waits on a socket releases the "
        "interpreter lock, so other threads run meanwhile. A lock must guard data that two "
        "threads change.",
        "Starting a thread costs less than starting a process."])
    write_docx(corpus / "asyncio.docx", "Asyncio memo", [
        "Asyncio runs every coroutine on one event loop in a single thread.",
        "Asyncio suits waiting on sockets: a coroutine yields at each await, which lets "
        "thousands of sockets wait at once.",
        "A blocking call inside a coroutine stalls the whole event loop."])
    state = research_topic(topic="Compare threading and asyncio for waiting on sockets",
                           batch_id="office", model="offline", search="corpus",
                           corpus_dir=str(corpus), db_path=str(db_path), return_state=True,
                           options=TopicOptions(max_subquestions=3, max_rounds=1))
    assert state.is_completed(), state.message
    report_id = state.result()
    store = ResultStore(db_path)
    cited = {c["url"] for c in store.get_report(report_id)["citations"]}
    pdf = {u for u in cited if "threads.pdf" in u}
    assert pdf and all(u.rsplit("#", 1)[1].startswith("page=") for u in pdf), cited
    assert (corpus / "asyncio.docx").as_uri() in cited, cited
    assert store.unverified_citations(report_id) == []
    _, sources = query_readonly(db_path, "SELECT url, text FROM sources")
    pages = dict(sources)
    assert all("\f" not in text for text in pages.values())
    for url in pdf:  # the stored source of a cited page is that page's text alone
        assert pages[url].startswith(("Threads handbook.", "Threading suits", "Starting a"))
