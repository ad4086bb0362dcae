"""Any model, any window: a topic on a model with a small window nobody told us about.

Each official SDK talks to a loopback provider that enforces a 6,000-token window (and an
OpenAI-compatible server with an unconfigured model at 4,096) and answers overflows with that
provider's real error. Pages are several times the window. The topic must complete with at most
one overflow per concurrently running task (the first call of each learns the window for all),
and a later topic on the same model, in a new process state, must hit no overflow at all: the
learned window is remembered in DuckDB.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models import TopicOptions
from tasks import contexts
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from tests.fakes.http import ScriptedServer
from tests.fakes.providers import WindowEnforcingHandler
from tests.fakes.research_provider import responder

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

CASES = {  # spec, wire, window, key variable, base URL variable, URL suffix
    "openai": ("openai:gpt-4o-mini", "openai", 6_000, "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1"),
    "anthropic": ("anthropic:claude-sonnet-4-5", "anthropic", 6_000, "ANTHROPIC_API_KEY",
                  "ANTHROPIC_BASE_URL", ""),
    "gemini": ("gemini:gemini-2.5-flash", "gemini", 6_000, "GEMINI_API_KEY",
               "RESEARCHFLOW_GEMINI_BASE_URL", ""),
    "unconfigured": ("openai-compatible:local-llama-q4", "openai", 4_096, "OPENAI_API_KEY",
                     "OPENAI_BASE_URL", "/v1"),
}
WORKERS = 2


@pytest.fixture()
def long_pages(tmp_path: Path) -> Path:
    folder = tmp_path / "long"
    folder.mkdir()
    for j, subject in enumerate(("Memory", "Blocking", "Waiting")):
        paragraphs = [f"# {subject} in threading and asyncio"] + [
            " ".join(f"{subject} example {i}-{k} shows that a threading or asyncio program "
                     f"waits on input or output for {i * 7 + k + j} milliseconds." for k in range(6))
            for i in range(60)]  # about 30,000 characters: several 6k-token windows
        (folder / f"{subject.lower()}.md").write_text("\n\n".join(paragraphs) + "\n",
                                                      encoding="utf-8")
    return folder


@pytest.mark.parametrize("case", list(CASES))
def test_a_small_unknown_window_costs_one_overflow_per_task_then_none(case, long_pages, db_path,
                                                                      monkeypatch):
    spec, wire, window, key_var, url_var, suffix = CASES[case]
    handler = WindowEnforcingHandler(wire, window, respond=responder(wire))
    with ScriptedServer(default=handler) as server:
        monkeypatch.setenv(key_var, "sk-test-small-window")
        monkeypatch.setenv(url_var, server.url + suffix)
        monkeypatch.setenv("RESEARCHFLOW_MAX_SUBQUESTION_WORKERS", str(WORKERS))
        kwargs = dict(batch_id="windows", model=spec,
                      options=TopicOptions(max_subquestions=2, max_rounds=1),
                      search="corpus", corpus_dir=str(long_pages), db_path=str(db_path))
        first = research_topic(topic=f"Threading or asyncio on a small window ({case})",
                               return_state=True, **kwargs)
        assert first.is_completed(), first.message
        # The plan runs alone, then up to WORKERS researchers at once, then compress/report.
        assert 1 <= handler.overflows <= 1 + WORKERS, handler.seen
        report = ResultStore(db_path).get_report(first.result())
        assert report["citations"], "chunked condensing lost the evidence"
        assert ResultStore(db_path).unverified_citations(first.result()) == []
        _, learned = query_readonly(db_path, "SELECT context_window FROM model_limits")
        assert learned and learned[0][0] <= window

        contexts.close()  # a new process: only DuckDB remembers the window
        overflows = handler.overflows
        second = research_topic(topic=f"Threading or asyncio, second topic ({case})",
                                return_state=True, **kwargs)
        assert second.is_completed(), second.message
        assert handler.overflows == overflows  # the remembered window: no overflow at all
