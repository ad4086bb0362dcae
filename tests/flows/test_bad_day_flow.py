"""A bad day at the provider, through the real flows and the real SDKs on loopback.

A share of calls is answered with the provider's real 429 (retry-after 1 s), 500, 503 or 529
bodies. Each topic must still complete with no successful call made twice, the usage ledger must
match the tokens the provider reported, a rerun must make no provider call at all, a budget must
stop a topic before it spends, and a failed topic must name its cause everywhere it is shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tasks.research
from core.models import TopicOptions
from core.store import ResultStore, query_readonly
from flows.batch import research_batch
from flows.cli import app
from flows.topic import research_topic
from tests.fakes import providers as fake
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import SDK_ENV, TEST_MODELS, ResearchProvider, write_pages
from tasks.retry import RETRIES
from tests.flows.prefect_api import artifacts, subflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]

SPECS, ENV = TEST_MODELS, SDK_ENV
SECRET = "sk-test-BADDAY-0a1b2c3d4e5f"


@pytest.fixture()
def pages(tmp_path: Path) -> Path:
    return write_pages(tmp_path / "pages", ("Memory", "Blocking", "Waiting", "Scheduling"))


@pytest.fixture()
def serve(monkeypatch):
    """Start a fake provider on loopback and point the provider's SDK at it (stopped after)."""
    servers: list[ScriptedServer] = []

    def start(provider: str, handler) -> ScriptedServer:
        server = ScriptedServer(default=handler).__enter__()
        servers.append(server)
        key_var, url_var, suffix = ENV[provider]
        monkeypatch.setenv(key_var, SECRET)
        monkeypatch.setenv(url_var, server.url + suffix)
        monkeypatch.setenv("RESEARCHFLOW_MAX_OUTPUT_TOKENS", "300")
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def topic_kwargs(provider: str, pages: Path, db: Path, topic: str) -> dict:
    return dict(topic=topic, batch_id="badday",
                options=TopicOptions(max_subquestions=2, max_rounds=2),
                model=SPECS[provider], search="corpus", corpus_dir=str(pages), db_path=str(db))


@pytest.mark.parametrize("provider", list(SPECS))
def test_a_topic_survives_20_percent_faults_paying_for_nothing_twice(provider, pages, db_path,
                                                                     serve):
    provider_fake = ResearchProvider(provider, fault_rate=0.2, seed=3)
    serve(provider, provider_fake)
    kwargs = topic_kwargs(provider, pages, db_path, f"Threading or asyncio ({provider})")
    state = research_topic(**kwargs, return_state=True)
    assert state.is_completed(), state.message
    assert provider_fake.faults >= 3, "the fault injection did not bite"
    assert provider_fake.repeated_successes == 0

    store = ResultStore(db_path)
    run_id = str(state.state_details.flow_run_id)
    usage = store.usage(run_id=run_id)
    assert usage.calls == provider_fake.calls  # one ledger row per provider call
    assert usage.failed_calls == provider_fake.faults
    reported = provider_fake.input_tokens + provider_fake.output_tokens
    assert usage.input_tokens + usage.output_tokens == reported
    assert usage.cost_usd > 0 and usage.unpriced_calls == 0
    _, rows = query_readonly(db_path, "SELECT DISTINCT role FROM ledger")
    assert {r for (r,) in rows} >= {"plan", "queries", "condense", "compress", "report"}
    _, rows = query_readonly(db_path, "SELECT count(*) FROM ledger WHERE role = "
                                      "'condense' AND subquestion_index IS NULL")
    assert rows == [(0,)]  # every page read is attributed to its sub-question

    shown = artifacts(state.state_details.flow_run_id)
    report_artifact = next(a for a in shown if (a.key or "").startswith("report-"))
    assert "usage:" in report_artifact.data and "cost $" in report_artifact.data

    calls = provider_fake.calls
    again = research_topic(**kwargs, return_state=True)
    assert again.is_completed() and again.result() == state.result()
    assert provider_fake.calls == calls  # a rerun of a finished topic calls nobody
    assert SECRET.encode() not in db_path.read_bytes()


def test_a_rerun_after_a_failure_pays_only_for_what_had_not_finished(pages, db_path, serve):
    provider_fake = ResearchProvider(
        "openai", fail_roles={"report": fake.auth_error("openai", api_key=SECRET)})
    serve("openai", provider_fake)
    kwargs = topic_kwargs("openai", pages, db_path, "Threading or asyncio, refused at the end")
    state = research_topic(**kwargs, return_state=True)
    assert state.is_failed()
    assert "report: Fatal by openai" in state.message and "OPENAI_API_KEY" in state.message
    assert SECRET not in state.message
    provider_fake.fail_roles.clear()  # the user fixes the key and reruns
    before = dict(provider_fake.by_role)
    again = research_topic(**kwargs, return_state=True)
    assert again.is_completed(), again.message
    spent = {role: n - before.get(role, 0) for role, n in provider_fake.by_role.items()
             if n != before.get(role, 0)}
    # Plan, searches, pages, compress: all from the cache. Only the report is paid again (at
    # this output cap it is written section by section, so in a few calls).
    assert set(spent) == {"report"}
    assert provider_fake.repeated_successes == 0
    _, rows = query_readonly(db_path, "SELECT status, error FROM topics")
    assert rows == [("succeeded", None)]


def test_a_budget_stops_the_topic_before_it_spends(pages, db_path, serve):
    provider_fake = ResearchProvider("openai")
    serve("openai", provider_fake)
    kwargs = topic_kwargs("openai", pages, db_path, "Threading or asyncio on a budget")
    state = research_topic(**kwargs, max_cost_usd=0.0001, return_state=True)
    assert state.is_failed()
    assert provider_fake.calls <= 2
    assert "budget" in state.message and "UnfinishedRun" not in state.message
    store = ResultStore(db_path)
    assert store.list_reports("badday") == []
    _, rows = query_readonly(db_path, "SELECT status, error FROM topics")
    assert len(rows) == 1 and rows[0][0] == "failed" and "budget" in rows[0][1]
    assert "--max-cost-usd" in rows[0][1]  # says what to do


def test_the_cli_stops_at_its_budget_and_says_so(pages, tmp_path, serve):
    provider_fake = ResearchProvider("openai")
    serve("openai", provider_fake)
    db = tmp_path / "cli.duckdb"
    result = CliRunner().invoke(app, [
        "run", "Threading or asyncio, from the CLI", "--model", SPECS["openai"],
        "--search", "corpus", "--corpus", str(pages), "--db", str(db),
        "--max-cost-usd", "0.0001"])
    assert result.exit_code == 1, result.output
    assert "budget" in result.output and "usage:" in result.output
    assert "UnfinishedRun" not in result.output and "Traceback" not in result.output
    assert provider_fake.calls <= 2
    _, rows = query_readonly(db, "SELECT status, run_id FROM topics")
    assert rows[0][0] == "failed" and rows[0][1]
    _, runs = query_readonly(db, "SELECT status FROM runs")
    assert runs == [("failed",)]  # a lone topic is a run of its own


def test_a_failed_topic_names_its_step_signal_attempts_and_remedy(pages, db_path, serve,
                                                                 monkeypatch):
    # Always rate limited while condensing pages: the condense task makes all its attempts (at once,
    # as every retry in the suite; the retry rules are the real ones) and the research task is
    # not retried.
    assert tasks.research.condense_hit.retry_delay_seconds == [0] * RETRIES
    monkeypatch.setattr(tasks.research.research, "retries", 0)
    provider_fake = ResearchProvider(
        "openai", fail_roles={"condense": fake.rate_limit_error("openai", retry_after=0)})
    serve("openai", provider_fake)
    state = research_topic(**topic_kwargs("openai", pages, db_path, "Threading or asyncio "
                                          "under a rate limit"), return_state=True)
    assert state.is_failed()
    assert provider_fake.by_role["condense"] >= RETRIES + 1
    _, rows = query_readonly(db_path, "SELECT error FROM topics")
    error = rows[0][0]
    for shown in (state.message, error):
        assert "research #" in shown
        assert f"RateLimited by openai after {RETRIES + 1} attempts" in shown
        assert "HTTP 429" in shown and "RESEARCHFLOW_MAX_SUBQUESTION_WORKERS" in shown
        assert "UnfinishedRun" not in shown and "PENDING" not in shown
        assert SECRET not in shown
    failed_calls = ResultStore(db_path).usage(run_id=str(state.state_details.flow_run_id))
    assert failed_calls.failed_calls == provider_fake.by_role["condense"]


def test_a_batch_at_its_budget_skips_the_rest_and_still_ends_with_its_table(
        pages, db_path, tmp_path, serve):
    provider_fake = ResearchProvider("openai")
    serve("openai", provider_fake)
    csv = tmp_path / "topics.csv"
    csv.write_text("topic\nThreading or asyncio, first\nThreading or asyncio, second\n"
                   "Threading or asyncio, third\n".replace(", ", " "), encoding="utf-8")
    state = research_batch(csv_path=str(csv), batch_id="budgeted", model=SPECS["openai"],
                           search="corpus", corpus_dir=str(pages), db_path=str(db_path),
                           max_concurrency=1, max_batch_cost_usd=0.0008, return_state=True)
    assert state.is_failed()
    _, rows = query_readonly(db_path, "SELECT topic, status, error FROM topics "
                                      "ORDER BY topic")
    statuses = sorted(r[1] for r in rows)
    assert statuses == ["failed", "skipped", "skipped"], rows
    assert all("budget" in r[2] for r in rows)
    assert ResultStore(db_path).list_reports("budgeted") == []
    spent = ResultStore(db_path).usage(batch_id="budgeted").cost_usd
    assert 0 < spent <= 0.0008
    table = next(a for a in artifacts(state.state_details.flow_run_id) if a.type == "table")
    data = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert sorted(r["status"] for r in data) == ["failed", "skipped", "skipped"]
    assert "usage:" in table.description
    # A skipped topic's subflow waited for its slot, was refused there and ends Cancelled
    # (not Failed) with the reason; nothing it would have paid for ran.
    topics = subflow_runs(state.state_details.flow_run_id)
    assert sorted(r.state.type.value for r in topics) == ["CANCELLED", "CANCELLED", "FAILED"]
    assert all("budget" in r.state.message for r in topics if r.state.is_cancelled())



def test_a_batch_rerun_after_one_topic_failed_repeats_no_call(pages, db_path, tmp_path, serve):
    provider_fake = ResearchProvider("openai")
    refused = {"on": True}

    def handler(rec):
        body = rec.json()
        if refused["on"] and "REFUSED" in rec.body.decode() and \
                "write a research report" in body["messages"][0]["content"]:
            return fake.auth_error("openai", api_key=SECRET)
        return provider_fake(rec)

    serve("openai", handler)
    csv = tmp_path / "topics.csv"
    csv.write_text("topic\nThreading or asyncio first\nThreading or asyncio REFUSED second\n",
                   encoding="utf-8")
    kwargs = dict(csv_path=str(csv), batch_id="rerun", model=SPECS["openai"], search="corpus",
                  corpus_dir=str(pages), db_path=str(db_path), return_state=True)
    assert research_batch(**kwargs).is_failed()
    before = dict(provider_fake.by_role)
    refused["on"] = False  # the cause is removed; the batch is run again
    assert research_batch(**kwargs).is_completed()
    spent = {role: n - before.get(role, 0) for role, n in provider_fake.by_role.items()
             if n != before.get(role, 0)}
    assert set(spent) == {"report"}  # only the refused report: every finished call was reused
    assert provider_fake.repeated_successes == 0
    assert len(ResultStore(db_path).list_reports("rerun")) == 2


def test_a_batch_on_auto_condenses_on_the_cheaper_model(pages, db_path, tmp_path, serve):
    provider_fake = ResearchProvider("anthropic")
    serve("anthropic", provider_fake)
    csv = tmp_path / "topics.csv"
    csv.write_text("topic\nThreading or asyncio on auto\n", encoding="utf-8")
    state = research_batch(csv_path=str(csv), batch_id="auto", search="corpus",
                           corpus_dir=str(pages), db_path=str(db_path), return_state=True)
    assert state.is_completed(), state.message
    _, rows = query_readonly(db_path, "SELECT DISTINCT role, model FROM ledger ORDER BY role")
    models = dict(rows)
    assert models["condense"] == "claude-haiku-4-5"  # the cheaper sibling, on auto
    assert models["plan"] == models["report"] == "claude-sonnet-5"


def _weak_topic(role: str, answer: str, fallback: str, topic: str, pages, db_path, serve,
                monkeypatch):
    """A topic on a model that gives `answer` to every `role` call, with `--fallback`."""
    monkeypatch.setenv("RESEARCHFLOW_FALLBACK", fallback)
    serve("openai", ResearchProvider(
        "openai", fail_roles={role: fake.success_reply("openai", answer)}))
    return research_topic(**topic_kwargs("openai", pages, db_path, topic), return_state=True)


def _fell_back_citing_verbatim(db_path, role: str) -> None:
    _, rows = query_readonly(db_path, "SELECT DISTINCT role FROM fallbacks")
    assert rows == [(role,)]
    _, cited = query_readonly(db_path, "SELECT c.quote, s.text FROM citations c "
                                       "JOIN sources s USING (url, content_hash)")
    assert cited and all(quote in text for quote, text in cited)
    _, (markdown,) = query_readonly(db_path, "SELECT markdown FROM reports")
    assert "**Fallbacks:**" in markdown[0] and role in markdown[0]


@pytest.mark.parametrize("fallback", ["extractive", "none"])
def test_a_model_that_quotes_nothing_it_read_gets_the_extractive_quotes_or_fails(
        fallback, pages, db_path, serve, monkeypatch):
    """A weak model answers compress with no claim on every section although pages were read.
    With fallbacks on, the extractive engine quotes those pages (one 'compress' fallback,
    named in the header); with `--fallback none` the topic fails for want of evidence."""
    state = _weak_topic("compress", '{"claims": []}', fallback,
                        f"Threading or asyncio, quoted ({fallback})", pages, db_path, serve,
                        monkeypatch)
    if fallback == "none":
        assert state.is_failed() and "report:" in state.message
        return
    assert state.is_completed(), state.message
    _fell_back_citing_verbatim(db_path, "compress")


def test_a_model_that_reads_nothing_gets_the_extractive_engines_research(pages, db_path, serve,
                                                                         monkeypatch):
    """A weak model chooses no page to read for any sub-question: the topic would end with no
    evidence, so the extractive engine researches the same sub-questions itself (one
    'research' fallback), and the report cites what it read, verbatim."""
    state = _weak_topic("choose", '{"read": [], "why": ""}', "extractive",
                        "Threading or asyncio, unread", pages, db_path, serve, monkeypatch)
    assert state.is_completed(), state.message
    _fell_back_citing_verbatim(db_path, "research")
