"""A weak model never sinks a topic: a role whose answers stay invalid after its bounded re-asks
is answered by the extractive engine, and that is told (ledger row, usage line, view, log);
`--fallback none` fails instead, naming the role.

The model here is the real openai SDK against a loopback server that answers like a weak
model: prose where JSON was asked, or one question three times.
"""

from __future__ import annotations

import json
import logging
import os

import duckdb
import pytest

from tasks import contexts
from core.engine.fallback import FallbackEngine
from core.engine.model_driven.calls import INVALID_OUTPUT
from core.engine.offline.extractive import ExtractiveEngine
from core.accounting.ledger import scoped
from core.models import Source, SubQuestion, Topic, Transcript
from core.overflow.roles import condense_with_shrink, plan_with_shrink
from core.settings import RunConfig
from core.signals import Fatal
from tests.fakes import providers as fake
from tests.fakes.http import ScriptedServer

TOPIC = Topic(text="How does the asyncio event loop schedule coroutines?", max_subquestions=3)
SQ = SubQuestion(index=0, question="How does the event loop pick the next coroutine to run?")
PAGE = Source(url="https://example.test/loop", title="The event loop",
              text="The event loop runs one callback at a time. A coroutine that awaits a "
                   "future gives control back to the loop. Ready callbacks run in the order "
                   "they were scheduled. Sockets are polled with the selector between rounds.")


def _prose(rec) -> object:
    return fake.success_reply("openai", "I am happy to help with that question!")


def _same_question(rec) -> object:
    question = {"question": "What is asyncio?", "queries": ["asyncio"]}
    return fake.success_reply("openai", json.dumps(
        {"brief": "asyncio", "intent": "describe", "subquestions": [question] * 3}))


def _config(url: str, tmp_path, **changes) -> RunConfig:
    """Each test its own store; the test process's cache (tests/conftest.py), so the extractive
    engine's corpus, the bundled CPython docs, is built and indexed once, not once per test."""
    return RunConfig(model="openai-compatible:weak-model", base_urls=(("openai", url + "/v1"),),
                     cache_dir=os.environ["RESEARCHFLOW_CACHE_DIR"],
                     db_path=str(tmp_path / "store.duckdb"),
                     context_windows=(("weak-model", 8_192),), **changes)


@pytest.fixture()
def fresh_contexts():
    contexts.close()
    yield contexts
    contexts.close()


def _looping(rec) -> object:
    """SmolLM2, seen in a real run: two good questions and one that loops inside its string."""
    questions = [{"question": "How does the event loop schedule coroutines?", "queries": ["a"]},
                 {"question": "What does await do?", "queries": ["b"]},
                 {"question": "What is the " + "asyncio " * 20, "queries": ["c"]}]
    return fake.success_reply("openai", json.dumps(
        {"brief": "asyncio", "intent": "describe", "subquestions": questions}))


@pytest.mark.parametrize("answer", [_prose, _same_question, _looping],
                         ids=["prose", "one-question-thrice", "looping-question"])
def test_a_plan_the_model_cannot_give_comes_from_the_offline_planner(answer, tmp_path,
                                                                     fresh_contexts, caplog):
    with ScriptedServer(default=answer) as server:
        config = _config(server.url, tmp_path)
        engine = fresh_contexts.context_for(config).engine
        with scoped(run_id="r1", topic_id="t1"), caplog.at_level(logging.WARNING,
                                                                 "researchflow.fallback"):
            plan = plan_with_shrink(engine.for_role("plan"), TOPIC)
        asked = len(server.requests)
    fresh_contexts.flush()
    # The offline planner's outline: the question's own parts (this topic asks one thing).
    assert [sq.question for sq in plan.subquestions] == [TOPIC.text]
    assert [p.heading for p in plan.parts] == [TOPIC.text]
    assert asked <= 3  # the bounded re-asks, no more
    assert "plan: the model's answers stayed invalid" in caplog.text
    totals = fresh_contexts.context_for(config).store.usage(topic_id="t1")
    assert (totals.fallbacks, totals.fallback_roles, totals.calls) == (1, "plan", asked)
    assert "1 answer(s) from the extractive engine (plan)" in totals.line()
    fresh_contexts.close()
    with duckdb.connect(config.db_path, read_only=True) as con:
        rows = con.execute("SELECT topic_id, role, times, last_reason FROM fallbacks").fetchall()
    assert [r[:3] for r in rows] == [("t1", "plan", 1)]
    assert "research plan" in rows[0][3]


def test_with_fallback_none_the_role_is_named_and_nothing_is_invented(tmp_path, fresh_contexts):
    with ScriptedServer(default=_prose) as server:
        strict = _config(server.url, tmp_path, fallback="none")
        engine = fresh_contexts.context_for(strict).engine
        with pytest.raises(Fatal) as raised:
            plan_with_shrink(engine.for_role("plan"), TOPIC)
    assert raised.value.reason == INVALID_OUTPUT
    assert str(raised.value).startswith("the plan role failed")
    assert "--fallback extractive" in str(raised.value)


def test_condense_falls_back_to_the_page_own_sentences(tmp_path, fresh_contexts):
    with ScriptedServer(default=_prose) as server:
        engine = fresh_contexts.context_for(_config(server.url, tmp_path)).engine
        notes = condense_with_shrink(engine.for_role("condense"), SQ, PAGE)
    lines = [line.removeprefix("- ") for line in notes.splitlines() if line.strip()]
    assert lines and all(line in PAGE.text for line in lines)


def test_other_failures_are_not_fallbacks(tmp_path):
    """Only invalid answers fall back: an auth error or an overflow reaches its caller."""
    calls: list[str] = []

    class Failing:
        def for_role(self, role):
            return self

        def plan(self, topic, *, max_tokens=None):
            raise Fatal("bad key", reason="auth")

    engine = FallbackEngine(Failing(), ExtractiveEngine(),
                            on_fallback=lambda role, sig: calls.append(role))
    with pytest.raises(Fatal, match="bad key"):
        engine.for_role("plan").plan(TOPIC)
    assert calls == []


def test_compress_and_report_fall_back_with_verbatim_quotes(tmp_path, fresh_contexts):
    from core.engine.sentences import units
    from core.models import Message
    from core.reports.report import assemble

    transcript = Transcript(subquestion=SQ, sources=[PAGE],
                            messages=[Message(role="tool", name="read", content=PAGE.text)])
    with ScriptedServer(default=_prose) as server:
        engine = fresh_contexts.context_for(_config(server.url, tmp_path)).engine
        finding = engine.for_role("compress").compress(transcript)
        plan = ExtractiveEngine().plan(TOPIC)
        draft = engine.for_role("report").write_report(plan, [finding])
    quotes = [e.quote for c in finding.claims for e in c.evidence]
    assert quotes and all(q in PAGE.text for q in quotes)
    assert units(PAGE.text)
    report = assemble(plan, [finding], draft, report_id="r", engine="x",
                      fallbacks="compress, report")
    assert "**Fallbacks:** the extractive engine answered for the model in: compress, report" \
        in report.markdown


def test_a_finding_that_quotes_none_of_the_pages_read_is_made_by_the_extractive_engine(
        tmp_path, fresh_contexts):
    """A weak model may answer `{"claims": []}` (or keep no notes) although pages were read:
    compress keeps that answer (a section with nothing to cite is the next wave's question),
    and `quote_instead` (asked for a topic that would end with no evidence at all) quotes
    those pages by the extractive engine, recorded as a fallback; not with fallbacks off."""
    from core.models import Message

    transcript = Transcript(subquestion=SQ, sources=[PAGE],
                            messages=[Message(role="tool", name="read", content=PAGE.text)])
    empty = lambda rec: fake.success_reply("openai", json.dumps({"claims": []}))  # noqa: E731
    with ScriptedServer(default=empty) as server:
        config = _config(server.url, tmp_path)
        fallback = fresh_contexts.context_for(config).fallback
        engine = fallback.for_role("compress")
        with scoped(run_id="r2", topic_id="t2"):
            assert not engine.compress(transcript).support
            finding = fallback.quote_instead(transcript)
            assert not fallback.quote_instead(transcript.model_copy(update={"sources": []}))
        strict = fresh_contexts.context_for(_config(server.url, tmp_path, fallback="none"))
        assert strict.fallback.quote_instead(transcript) is None
    assert finding.support and all(e.quote in PAGE.text
                                   for c in finding.claims for e in c.evidence)
    fresh_contexts.flush()
    totals = fresh_contexts.context_for(config).store.usage(topic_id="t2")
    assert totals.fallback_roles == "compress"


def test_a_report_that_cites_none_of_its_evidence_is_asked_again_then_falls_back(
        tmp_path, fresh_contexts):
    """SmolLM2 once wrote a report in the outline's shape that cited no [E..] key: stored, it
    would be a report without references (and the topic failed for no evidence). Such an answer
    is invalid: asked once more, then the extractive engine writes the report, citing
    verbatim."""
    from core.engine.offline.extractive import ExtractiveEngine as Offline

    transcript = Transcript(subquestion=SQ, sources=[PAGE])
    finding = Offline().compress(transcript)
    plan = Offline().plan(TOPIC).model_copy(update={"subquestions": (SQ,)})
    uncited = "# Report\n\n## [summary] Summary\n\nThe loop runs coroutines.\n\n" \
              "## [S1] The loop\n\nIt runs one callback at a time.\n\n" \
              "## [conclusion] Conclusion\n\nThat is how it works."
    with ScriptedServer(default=lambda rec: fake.success_reply("openai", uncited)) as server:
        engine = fresh_contexts.context_for(_config(server.url, tmp_path)).engine
        draft = engine.for_role("report").write_report(plan, [finding])
        asked = len(server.requests)
    assert finding.support and asked == 2  # the answer, and one re-ask
    assert "[E1]" in draft.sections[0].body  # the extractive engine's, which cites
