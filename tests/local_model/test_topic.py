"""A topic end to end on SmolLM2 served by llama.cpp: through the CLI as a user types it, and
through the topic flow with `--fallback none`.

No context window is configured (the server says it), no call overflows or generates past its
role's cap, the ledger holds exactly the tokens the server reported, and every citation is
verbatim. With fallbacks off the topic completes or fails naming the role, in bounded time.
"""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from core.engine.model_driven.calls import ROLE_OUTPUT_TOKENS
from core.store.query import query_readonly
from flows.cli import app
from tests.flows.conftest import corpus  # noqa: F401 - the flow tests' small corpus
from tests.local_model.usage_proxy import UsageProxy

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("llama"),
              pytest.mark.usefixtures("prefect_harness")]

TOPIC = "How does Python's asyncio event loop schedule coroutines?"
SMALL = ["--max-subquestions", "2", "--max-waves", "1", "--max-rounds", "1", "--max-pages", "1",
         "--report-words", "200"]


@pytest.fixture()
def local_env(monkeypatch):
    def point_at(url: str, fallback: str = "extractive") -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("RESEARCHFLOW_FALLBACK", fallback)
        # One core of a CI machine shared with the other test worker: a call may wait minutes.
        monkeypatch.setenv("RESEARCHFLOW_REQUEST_TIMEOUT", "900")
        monkeypatch.delenv("RESEARCHFLOW_CONTEXT_WINDOWS", raising=False)
    return point_at


def _verbatim(db) -> tuple[int, int]:
    """(citations, citations whose quote is in the stored text of their source)."""
    _, rows = query_readonly(db, "SELECT c.quote, s.text FROM citations c "
                                 "JOIN sources s USING (url, content_hash)")
    return len(rows), sum(quote in text for quote, text in rows)


def test_a_topic_on_smollm2_through_the_cli(llama, corpus, tmp_path, local_env, caplog):
    db = tmp_path / "store.duckdb"
    with UsageProxy(llama.root) as proxy:
        local_env(proxy.base_url)
        result = CliRunner().invoke(app, ["run", TOPIC, "--model", "openai-compatible:smollm2",
                                          "--search", "corpus", "--corpus", str(corpus),
                                          "--db", str(db), *SMALL])
        sent = proxy.completions()
    print(proxy.table())
    print(result.output)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert "No context window known" not in caplog.text + result.output
    # Nothing overflowed, and no call generated past what its role needs.
    assert sent and all(e.status == 200 for e in sent)
    for e in sent:
        assert e.usage["completion_tokens"] <= e.request["max_tokens"]
        if "response_format" in e.request:  # grammar-constrained and bounded
            assert e.request["response_format"]["type"] == "json_schema"
            assert e.request["max_tokens"] <= max(ROLE_OUTPUT_TOKENS.values())
    # The ledger holds what the server reported, no more and no less.
    _, rows = query_readonly(db, "SELECT sum(input_tokens), sum(output_tokens), "
                                 "count(*) FILTER (WHERE outcome = 'ok') FROM ledger "
                                 "WHERE provider = 'openai-compatible'")
    assert rows[0] == (sum(e.usage["prompt_tokens"] for e in sent),
                       sum(e.usage["completion_tokens"] for e in sent), len(sent))
    _, rows = query_readonly(db, "SELECT count(*) FROM ledger WHERE outcome = 'ContextOverflow'")
    assert rows == [(0,)]
    _, rows = query_readonly(db, "SELECT DISTINCT role FROM ledger")
    assert {"plan", "report"} <= {role for (role,) in rows}  # the roles test asks neither
    # A stored report whose every citation is verbatim.
    _, reports = query_readonly(db, "SELECT report_id, markdown FROM reports")
    assert len(reports) == 1
    cited, verbatim = _verbatim(db)
    assert cited >= 1 and verbatim == cited
    _, fallbacks = query_readonly(db, "SELECT role FROM fallbacks ORDER BY role")
    if fallbacks:  # each one named in the header and the closing line
        assert "**Fallbacks:**" in reports[0][1]
        assert "from the extractive engine" in result.output


def test_with_fallback_none_the_topic_completes_or_names_the_role(llama, corpus, tmp_path,
                                                                  local_env):
    from flows.topic import research_topic
    from core.models import TopicOptions

    db = tmp_path / "strict.duckdb"
    local_env(llama.base_url, fallback="none")
    started = time.monotonic()
    state = research_topic(topic=TOPIC, model="openai-compatible:smollm2", search="corpus",
                           corpus_dir=str(corpus), db_path=str(db),
                           options=TopicOptions(max_subquestions=2, max_waves=1, max_rounds=1,
                                                max_pages=1, report_words=200),
                           return_state=True)
    seconds = time.monotonic() - started
    print(f"--fallback none: {state.type.value} after {seconds:.0f} s: {state.message}")
    assert seconds < 900
    if state.is_completed():
        cited, verbatim = _verbatim(db)
        assert cited == verbatim
        _, rows = query_readonly(db, "SELECT count(*) FROM fallbacks")
        assert rows == [(0,)]
    else:
        assert state.is_failed()
        assert " role failed" in state.message
        _, rows = query_readonly(db, "SELECT status, error FROM topics")
        assert rows[0][0] == "failed" and " role failed" in rows[0][1]
