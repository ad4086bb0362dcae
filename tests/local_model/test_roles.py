"""Every role of the model-driven engine but the plan and the report (the topic tests ask
those, tests/local_model/test_topic.py) against a real 135M model on llama.cpp's server.

What must hold whatever the model writes: each role either answers in its shape or is answered
by the extractive engine with the fallback recorded (it never raises), each request asks for
grammar-constrained JSON bounded by the role's schema, no call generates past its role's cap,
every quote is verbatim, and nothing overflows: the window comes from the server itself.
"""

from __future__ import annotations

import pytest

from tasks import contexts
from core.engine.model_driven.calls import ROLE_OUTPUT_TOKENS
from core.accounting.ledger import acting_as, scoped
from core.models import Message, ResearchPlan, SearchResult, Source, SubQuestion, Transcript
from core.overflow.recovery import compress_with_shrink
from core.overflow.roles import (choose_with_shrink, condense_with_shrink, queries_with_shrink,
                                 review_with_shrink, rewrite_with_shrink)
from core.settings import RunConfig
from tests.local_model.usage_proxy import UsageProxy

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("llama")]

SQ = SubQuestion(index=0, question="How does the asyncio event loop decide which coroutine "
                                   "runs next?")
# The plan the review reads. The plan role itself is asked by both topic tests, with the same
# checks as here (in shape or fallen back, grammar-constrained, within its cap): asking it here
# too cost ~430 generated tokens, ~15 s of the one core the model gets.
PLAN = ResearchPlan(topic="How does Python's asyncio event loop schedule coroutines?",
                    brief="How asyncio picks the next coroutine to run.", report_words=200,
                    subquestions=(SQ, SubQuestion(index=1, question="What makes a coroutine "
                                                                    "give control back?")))
PAGE = Source(url="https://docs.example/asyncio-loop", title="The asyncio event loop",
              text="The event loop runs in a single thread. It keeps a queue of ready callbacks "
                   "and runs them one after another. A coroutine runs until it reaches an "
                   "await on something that is not ready. Then it gives control back to the "
                   "event loop, which runs the next ready callback. When a future completes, "
                   "the task waiting on it is scheduled again. Between rounds the loop polls "
                   "sockets with a selector.")
HITS = [SearchResult(url=f"https://docs.example/{n}", title=title, snippet=snippet)
        for n, (title, snippet) in enumerate([
            ("The asyncio event loop", "How the event loop runs ready callbacks in turn."),
            ("Sourdough starters", "Feeding a starter twice a day."),
            ("Coroutines and tasks", "A task wraps a coroutine and schedules it on the loop.")])]


def _config(url: str, tmp_path) -> RunConfig:
    return RunConfig(model="openai-compatible:smollm2", base_urls=(("openai", url),),
                     cache_dir=str(tmp_path / "cache"), db_path=str(tmp_path / "store.duckdb"),
                     request_timeout=900)  # a shared CI core may run it at a few tokens a second


def test_every_role_answers_in_shape_or_falls_back_within_its_cap(llama, tmp_path, caplog):
    with UsageProxy(llama.root) as proxy:
        config = _config(proxy.base_url, tmp_path)
        context = contexts.context_for(config)
        engine = context.engine
        with scoped(run_id="roles", topic_id="roles-topic"):
            transcript = Transcript(subquestion=SQ, sources=[PAGE], queries_run=["asyncio loop"])
            with acting_as("choose"):
                chosen = choose_with_shrink(engine.for_role("queries"), transcript, HITS, 2)
            with acting_as("condense"):
                notes = condense_with_shrink(engine.for_role("condense"), SQ, PAGE)
            transcript.messages.append(Message(role="tool", name="read",
                                               content=f"Source: {PAGE.url}\n{notes}"))
            with acting_as("queries"):
                queries = queries_with_shrink(engine.for_role("queries"), transcript, 0)
            with acting_as("rewrite"):
                rewritten = rewrite_with_shrink(engine.for_role("queries"), SQ,
                                                ["asyncio loop order"], HITS)
            with acting_as("compress"):
                finding = compress_with_shrink(engine.for_role("compress"), transcript)
            with acting_as("review"):
                followups = review_with_shrink(engine.for_role("plan"), PLAN, [finding], [], 1, 1)
            # The report role is the topic test's (tests/local_model/test_topic.py): a weak
            # model's markdown runs to its cap twice there, the slowest calls of all.
        context.flush()
        rows = context.store.usage(topic_id="roles-topic")
        sent = proxy.completions()
        print(proxy.table())

    # Each role gave an answer of its shape (from the model, or the extractive engine).
    assert all(i in range(len(HITS)) for i in chosen)
    assert isinstance(queries, list) and isinstance(rewritten, list)
    assert isinstance(followups, list)
    assert all(line.removeprefix("- ").strip() in PAGE.text
               for line in notes.splitlines()[1:] if line.strip())
    quotes = [e.quote for c in finding.claims for e in c.evidence]
    assert all(q in PAGE.text for q in quotes)
    # The window came from the server: nothing overflowed, no default window was assumed.
    assert "No context window known" not in caplog.text
    assert all(e.status == 200 for e in sent), [e.status for e in sent]
    # Every JSON request is grammar-constrained and bounded; no call past its role's cap.
    for e in sent:
        cap = e.request.get("max_tokens")
        assert e.usage["completion_tokens"] <= cap
        if "response_format" in e.request:
            assert e.request["response_format"]["type"] == "json_schema"
            assert cap <= max(ROLE_OUTPUT_TOKENS.values())
    assert rows.calls - rows.served_calls == len(sent) and rows.failed_calls == 0
    assert rows.output_tokens == sum(e.usage["completion_tokens"] for e in sent)
    assert rows.input_tokens == sum(e.usage["prompt_tokens"] for e in sent)
    print(f"roles: {rows.calls} calls, {rows.output_tokens} output tokens, fallbacks: "
          f"{rows.fallback_roles or 'none'}")
