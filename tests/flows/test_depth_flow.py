"""Research depth through the real flows and each real SDK on loopback.

The loopback provider (tests/fakes/research_provider.py) plans four dimensions, one of which
no page covers: its researcher condenses nothing, so the first wave leaves a section without
evidence and the supervisor must ask a follow-up, researched as a second wave. Every prompt must
carry today's date, a Chinese topic's prompts must ask for Chinese, condensing must answer with
sentence ids (so its output is small), and every citation must still be the page's own text.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.topic import research_topic
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import (SDK_ENV, TEST_MODELS, UNCOVERED, ResearchProvider,
                                          system_text, write_pages)
from tests.flows.prefect_api import artifacts

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

SPECS, ENV = TEST_MODELS, SDK_ENV
ZH_TOPIC = "线程和异步IO在等待网络时有什么区别"


@pytest.fixture()
def pages(tmp_path: Path) -> Path:
    return write_pages(tmp_path / "pages", ("Memory", "Blocking", "Waiting"), chinese=True)


@pytest.fixture()
def provider_server(request, monkeypatch):
    provider = request.param
    fake = ResearchProvider(provider)
    with ScriptedServer(default=fake) as server:
        key_var, url_var, suffix = ENV[provider]
        monkeypatch.setenv(key_var, "sk-test-depth")
        monkeypatch.setenv(url_var, server.url + suffix)
        yield provider, server


def run(provider: str, pages: Path, db: Path, topic: str, **kw) -> str:
    state = research_topic(topic=topic, batch_id="depth", model=SPECS[provider], search="corpus",
                           corpus_dir=str(pages), db_path=str(db), return_state=True,
                           options=TopicOptions(**kw))
    assert state.is_completed(), state.message
    return state.result()


@pytest.mark.parametrize("provider_server", list(SPECS), indirect=True)
def test_a_section_left_without_evidence_gets_a_second_wave(provider_server, pages, db_path):
    provider, server = provider_server
    report_id = run(provider, pages, db_path, f"Threading vs asyncio for waiting ({provider})")

    _, rows = query_readonly(db_path, "SELECT idx, wave, why, parent, question FROM subquestions "
                                      "ORDER BY idx")
    assert [r[1] for r in rows] == [1, 1, 1, 1, 2]  # the plan's four, then one follow-up
    uncovered = next(r[0] for r in rows if UNCOVERED in r[4])
    idx, wave, why, parent, _ = rows[-1]
    assert parent == uncovered and why  # it completes the section that had no evidence
    bodies = [rec.json() or {} for rec in server.requests]
    systems = [system_text(provider, b) for b in bodies]
    assert any("You lead a research team" in s for s in systems)  # the supervisor reviewed

    report = ResultStore(db_path).get_report(report_id)
    markdown = report["markdown"]
    assert markdown.index("## Executive summary") < markdown.index("## Comparison") \
        < markdown.index("## Conclusion") < markdown.index("## References")
    # The follow-up's evidence fills the section that the first wave left empty.
    section = markdown.split(f"## Part {uncovered + 1}", 1)[1].split("\n## ", 1)[0]
    assert "[insufficient evidence]" not in section and "[" in section

    today = datetime.date.today().isoformat()
    assert systems and all(f"Today's date is {today}" in s for s in systems)
    assert all("English (en)" in s for s in systems)

    assert ResultStore(db_path).unverified_citations(report_id) == []
    _, cited = query_readonly(db_path, "SELECT c.quote, s.text FROM citations c JOIN sources s "
                                       "USING (url, content_hash) WHERE c.report_id = ?",
                              [report_id])
    assert cited and all(quote in text for quote, text in cited)  # verbatim, byte for byte

    # Condensing answers with sentence ids: a few tokens, never the page retyped.
    _, [(calls, out)] = query_readonly(db_path, "SELECT count(*), sum(output_tokens) FROM ledger "
                                              "WHERE role = 'condense' AND outcome = 'ok'")
    assert calls and out / calls < 40
    _, roles = query_readonly(db_path, "SELECT DISTINCT role FROM ledger")
    assert {"choose", "review"} <= {r for (r,) in roles}

    shown = artifacts(str(state_flow_run_id(db_path, report_id)))
    assert any("Wave 2" in str(a.data) for a in shown)


def state_flow_run_id(db: Path, report_id: str) -> str:
    _, rows = query_readonly(db, "SELECT t.run_id FROM topics t JOIN reports r USING (topic_id) "
                                 f"WHERE r.report_id = '{report_id}'")
    return rows[0][0]


@pytest.mark.parametrize("provider_server", list(SPECS), indirect=True)
def test_a_chinese_topic_is_asked_and_reported_in_chinese(provider_server, pages, db_path):
    provider, server = provider_server
    report_id = run(provider, pages, db_path, f"{ZH_TOPIC}（{provider}）")
    systems = [system_text(provider, rec.json() or {}) for rec in server.requests]
    assert systems and all("Chinese (zh)" in s for s in systems)
    report = ResultStore(db_path).get_report(report_id)
    assert "## 执行摘要" in report["markdown"] and "## 结论" in report["markdown"]
    _, [(language,)] = query_readonly(db_path, "SELECT language FROM reports")
    assert language == "zh"
    assert ResultStore(db_path).unverified_citations(report_id) == []


@pytest.mark.parametrize("provider_server", ["openai"], indirect=True)
def test_language_option_overrides_the_topic_and_one_wave_asks_no_supervisor(provider_server,
                                                                            pages, db_path):
    provider, server = provider_server
    run(provider, pages, db_path, ZH_TOPIC, language="English", max_waves=1)
    systems = [system_text(provider, rec.json() or {}) for rec in server.requests]
    assert all("English (en)" in s for s in systems)
    assert not any("You lead a research team" in s for s in systems)
    _, waves = query_readonly(db_path, "SELECT DISTINCT wave FROM subquestions")
    assert waves == [(1,)]


@pytest.mark.parametrize("provider_server", ["anthropic"], indirect=True)
def test_a_rerun_of_a_two_wave_topic_makes_no_provider_call(provider_server, pages, db_path):
    provider, server = provider_server
    topic = "Threading vs asyncio, rerun of two waves"
    run(provider, pages, db_path, topic)
    first = len(server.requests)
    systems = [system_text(provider, rec.json() or {}) for rec in server.requests]
    assert any("You lead a research team" in s for s in systems)  # the review ran
    run(provider, pages, db_path, topic)
    assert len(server.requests) == first  # plan, both waves, review and report: all cached
    _, waves = query_readonly(db_path, "SELECT max(wave) FROM subquestions")
    assert waves == [(2,)]
