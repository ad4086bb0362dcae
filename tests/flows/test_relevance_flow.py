"""The gate before a report, through the real topic flow: an off-corpus question is recorded as
failed with its one-line reason and never stored as a report, whichever engine researched it
(the offline engine; a model on loopback that quotes whatever it read, and the extractive engine
researching for it); a part no evidence answers is named in the report's header and the store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import SDK_ENV, TEST_MODELS, ResearchProvider, write_pages

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

PAGES = {
    "tarn-snapshot.html": ("tarn-snapshot(1)", "A snapshot records every file of the tree with "
                           "its size, owner and modification time. Snapshots are kept for 60 days "
                           "by default. A snapshot of a home directory is made like any other, "
                           "and two snapshots make a pair that tarn diff compares."),
    "tarn-restore.html": ("tarn-restore(1)", "Restore writes the files of a snapshot into a "
                          "target directory. Restore verifies each chunk against its checksum "
                          "before writing it, so a damaged chunk is never restored silently."),
}


@pytest.fixture()
def tarn(tmp_path: Path) -> Path:
    folder = tmp_path / "tarn"
    folder.mkdir()
    for name, (title, text) in PAGES.items():
        (folder / name).write_text(f"<html><head><title>{title}</title></head><body><h1>{title}"
                                   f"</h1><p>{text}</p></body></html>", encoding="utf-8")
    return folder


def _run(topic: str, corpus: Path, db: Path, model: str = "offline"):
    return research_topic(topic=topic, batch_id="gate", model=model, search="corpus",
                          corpus_dir=str(corpus), db_path=str(db), return_state=True,
                          options=TopicOptions(max_subquestions=3, max_rounds=1, max_waves=1))


def test_an_off_corpus_question_is_a_failed_topic_not_a_report(tarn: Path,
                                                                db_path: Path) -> None:
    state = _run("Which wines pair well with grilled salmon?", tarn, db_path)
    assert state.is_failed()
    _, rows = query_readonly(db_path, "SELECT status, error FROM topics")
    (status, error), = rows
    assert status == "failed" and "\n" not in error, rows
    assert "the corpus has no page about 'wines grilled salmon'" in error
    assert query_readonly(db_path, "SELECT count(*) FROM reports")[1] == [(0,)]


def test_a_part_without_evidence_is_named_in_the_header_and_the_store(tarn: Path,
                                                                      db_path: Path) -> None:
    state = _run("How long are tarn snapshots kept, and how does tarn encrypt them with AES?",
                 tarn, db_path)
    assert state.is_completed(), state.message
    report = ResultStore(db_path).get_report(state.result())
    header = report["markdown"].split("\n## ", 1)[0]
    assert "**Unanswered:** no evidence about the subject for: How does tarn encrypt " \
           "them with AES?" in header, header
    assert report["unanswered"] == ["How does tarn encrypt them with AES?"]
    assert "60 days" in report["markdown"]


@pytest.fixture()
def weak_model(monkeypatch):
    """A model on loopback that plans, reads and quotes whatever it is shown (the openai SDK)."""
    fake = ResearchProvider("openai")
    with ScriptedServer(default=fake) as server:
        key_var, url_var, suffix = SDK_ENV["openai"]
        monkeypatch.setenv(key_var, "sk-test-gate")
        monkeypatch.setenv(url_var, server.url + suffix)
        yield server


def test_a_model_quoting_off_subject_pages_cannot_pass_the_gate(weak_model, tmp_path: Path,
                                                                db_path: Path) -> None:
    pages = write_pages(tmp_path / "pages", ("Memory", "Blocking"))
    state = _run("Which wines pair well with grilled salmon?", pages, db_path,
                 model=TEST_MODELS["openai"])
    assert state.is_failed()
    # The model did read pages and quote them; the gate, not a lack of quotes, refused.
    _, calls = query_readonly(db_path, "SELECT count(*) FROM ledger WHERE role = 'compress' "
                                       "AND outcome = 'ok'")
    assert calls[0][0] >= 1, calls
    _, rows = query_readonly(db_path, "SELECT status, error FROM topics")
    assert rows[0][0] == "failed" and "no page about 'wines" in rows[0][1], rows
    assert "salmon" in rows[0][1]
    assert query_readonly(db_path, "SELECT count(*) FROM reports")[1] == [(0,)]
