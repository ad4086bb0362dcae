"""The topic flow under a real Prefect server: report stored, quotes verbatim, cache on rerun."""

from __future__ import annotations

import pytest

from core.models import TopicOptions
from core.store import ResultStore
from flows.topic import research_topic
from tests.flows.prefect_api import task_runs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

TOPIC = "Compare threading, multiprocessing and asyncio for concurrent I/O"


def _task_states(flow_run_id) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in task_runs(flow_run_id):
        out.setdefault(r.task_key.rsplit("-", 1)[0] if r.task_key else r.name, []).append(
            r.state.name if r.state else "?")
    return out


def test_topic_flow_stores_a_cited_report_and_hits_cache_on_rerun(corpus, db_path):
    kwargs = dict(topic=TOPIC, batch_id="flowtest",
                  options=TopicOptions(max_subquestions=3, max_rounds=1),
                  model="offline", search="corpus", corpus_dir=str(corpus), db_path=str(db_path))
    first = research_topic(**kwargs, return_state=True)
    assert first.is_completed(), first.message
    report_id = first.result()

    store = ResultStore(db_path)
    report = store.get_report(report_id)
    assert report is not None
    md = report["markdown"]
    assert "Extractive offline report" in md
    assert "| Dimension | threading | multiprocessing | asyncio |" in md  # a column each
    # The sections are the question's parts: each option for its purpose (three sub-questions
    # leave no room for a section on how they differ).
    for option in ("threading", "multiprocessing", "asyncio"):
        assert f"\n## {option} for concurrent I/O\n" in md, md
    assert "## References" in md and "\n1. " in md
    assert report["citations"], "the offline engine found nothing to cite in a matching corpus"
    assert store.unverified_citations(report_id) == []
    counts = store.counts()

    second = research_topic(**kwargs, return_state=True)
    assert second.is_completed() and second.result() == report_id
    states = _task_states(second.state_details.flow_run_id)
    cached = [s for name, ss in states.items() if not name.startswith("store") for s in ss]
    assert cached and all(s == "Cached" for s in cached), states
    after = store.counts()
    assert after.pop("runs") == counts.pop("runs") + 1  # each ad-hoc run is recorded
    assert after == counts  # idempotent per (batch, topic)


def test_a_topic_the_corpus_has_nothing_on_fails_with_its_reason(tmp_path, db_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    state = research_topic(topic=TOPIC, batch_id="flowtest",
                           options=TopicOptions(max_subquestions=2, max_rounds=1),
                           model="offline", search="corpus", corpus_dir=str(empty),
                           db_path=str(db_path), return_state=True)
    assert state.is_failed()  # not a succeeded report with zero references
    with pytest.raises(Exception, match="the corpus has no page about"):
        state.result()
