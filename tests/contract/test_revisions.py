"""Revised calls through the real openai SDK, against the loopback research provider: a step whose
page or notes changed in a few lines is asked about those lines with its earlier answer
(core.engine.model_driven.revising), never the whole page again, and what it returns is the
page's current text."""

from __future__ import annotations

from typing import Iterator

import pytest
from pydantic import SecretStr

from core.accounting.memo import CallMemo
from core.engine.model_driven.llm_engine import LLMEngine
from core.engine.model_driven.revisions import Revisions
from core.llm.openai import OpenAIChat
from core.models import Message, SearchResult, Source, SubQuestion, ToolCall, Transcript
from core.overflow.roles import condense_with_shrink
from core.overflow.tokens import TokenEstimator
from core.overflow.windows import ContextLimits
from tests.fakes import providers as fake
from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import ResearchProvider

MODEL = "gpt-4o-mini"
URL = "https://sockets.example/waiting"
TITLE = "Waiting On Sockets in threading and asyncio"
LINES = [f"Waiting on sockets example {i} shows that a threading or asyncio program waits on "
         f"input or output for {i * 7} milliseconds before it resumes." for i in range(20)]
SQ = SubQuestion(index=0, question="How do threading and asyncio differ in waiting (for waiting "
                 "on sockets)?", queries=("threading asyncio waiting",), language="en")
CONDENSE = b"pick the evidence on one web page"


@pytest.fixture()
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=ResearchProvider("openai")) as srv:
        yield srv


def engine_on(srv: ScriptedServer, memo: CallMemo) -> LLMEngine:
    chat = OpenAIChat(MODEL, api_key=SecretStr("sk-test-0123456789"), base_url=srv.url + "/v1",
                      timeout=10)
    return LLMEngine(chat, limits=ContextLimits({MODEL: 128_000}, default=128_000),
                     estimator=TokenEstimator(), max_output_tokens=2_000,
                     revisions=Revisions(memo, chat))


def page(lines: list[str]) -> Source:
    return Source(url=URL, title=TITLE, text="\n".join(lines))


def edited(i: int, old: str, new: str, lines: list[str] = LINES) -> list[str]:
    out = list(lines)
    assert old in out[i]
    out[i] = out[i].replace(old, new)
    return out


def transcript(engine: LLMEngine, source: Source) -> Transcript:
    """One page read and condensed, as core.researcher records it."""
    t = Transcript(subquestion=SQ, queries_run=list(SQ.queries))
    call = ToolCall(id="f0", name="read", arguments={"url": URL})
    t.messages.append(Message(role="assistant", tool_calls=(call,)))
    t.sources.append(source)
    t.messages.append(Message(role="tool", tool_call_id="f0", name="read",
                              content=f"Source: {TITLE} <{URL}>\n{engine.condense(SQ, source)}"))
    return t


def sent(srv: ScriptedServer, since: int) -> list[bytes]:
    return [r.body for r in srv.requests[since:]]


def test_a_changed_page_is_condensed_from_its_changed_sentences(server: ScriptedServer) -> None:
    engine = engine_on(server, CallMemo(None, ttl_hours=24))
    first = engine.condense(SQ, page(LINES))
    assert len(server.requests) == 1
    assert LINES[1] in first and LINES[10] not in first  # the top and the bottom of the page

    # A chosen sentence reworded: the model is shown that sentence alone, and its verdict on
    # the other nineteen stands.
    reworded = edited(1, "waits on input or output", "stalls on a socket read")
    mark = len(server.requests)
    notes = engine.condense(SQ, page(reworded))
    [body] = sent(server, mark)
    assert CONDENSE in body and b"stalls on a socket read" in body
    assert b"example 2 " not in body and b"example 0 " not in body
    assert reworded[1] in notes and LINES[1] not in notes
    assert all(reworded[i] in notes for i in (0, 2, 3, 16, 17, 18, 19))

    # A sentence nothing chose, reworded: asked, said to have been passed over, still passed.
    middle = edited(10, "waits on input or output", "stalls on a socket read", reworded)
    mark = len(server.requests)
    assert engine.condense(SQ, page(middle)) == notes
    [body] = sent(server, mark)
    assert b"earlier version you did not choose: 11" in body

    # A figure edited: what the sentence is about is the same; no call, the new figure kept.
    figure = edited(0, "for 0 milliseconds", "for 9 milliseconds", middle)
    mark = len(server.requests)
    again = engine.condense(SQ, page(figure))
    assert sent(server, mark) == [] and figure[0] in again and middle[0] not in again

    # A page rewritten throughout is condensed in full.
    rewritten = [t.replace("shows that", "says that") for t in figure]
    mark = len(server.requests)
    engine.condense(SQ, page(rewritten))
    [body] = sent(server, mark)
    assert all(f"example {i} says".encode() in body for i in range(20))


def test_a_finding_is_written_again_only_where_its_quotes_changed(server: ScriptedServer) -> None:
    engine = engine_on(server, CallMemo(None, ttl_hours=24))
    before = engine.compress(transcript(engine, page(LINES)))
    quoted = {e.quote for c in before.claims for e in c.evidence}
    assert {LINES[0], LINES[1]} <= quoted

    figure = edited(0, "for 0 milliseconds", "for 9 milliseconds")
    t = transcript(engine, page(figure))
    mark = len(server.requests)
    after = engine.compress(t)
    [body] = sent(server, mark)  # condensing the figure cost nothing; the finding one call
    assert b"updating a researcher's findings" in body and b"for 9 milliseconds" in body
    assert LINES[2].encode() not in body  # only what changed is shown
    unchanged = [c for c in before.claims if all(e.quote != LINES[0] for e in c.evidence)]
    assert all(c in after.claims for c in unchanged)  # kept as they were
    quotes = [e.quote for c in after.claims for e in c.evidence]
    assert figure[0] in quotes and LINES[0] not in quotes
    assert all(q in page(figure).text for q in quotes)
    assert after.raw_notes and "for 9 milliseconds" in after.raw_notes


def test_a_decision_on_searches_is_revised_on_words_and_kept_on_figures(
        server: ScriptedServer) -> None:
    engine = engine_on(server, CallMemo(None, ttl_hours=24))
    first = engine.next_queries(transcript(engine, page(LINES)), 1)
    assert first == ["asyncio waiting details"]

    figure = transcript(engine, page(edited(0, "for 0 milliseconds", "for 9 milliseconds")))
    mark = len(server.requests)
    assert engine.next_queries(figure, 1) == first and sent(server, mark) == []

    reworded = edited(1, "waits on input or output", "stalls on a socket read",
                      edited(0, "for 0 milliseconds", "for 9 milliseconds"))
    words = transcript(engine, page(reworded))
    mark = len(server.requests)
    assert engine.next_queries(words, 1) == first
    [body] = sent(server, mark)
    assert b"decided before what to do after this round" in body
    assert b"stalls on a socket read" in body and b"example 5 " not in body


def test_a_revision_the_model_cannot_give_is_asked_in_full(server: ScriptedServer) -> None:
    engine = engine_on(server, CallMemo(None, ttl_hours=24))
    engine.condense(SQ, page(LINES))
    for _ in range(2):  # the revision and its re-ask answered with prose
        server.push(fake.success_reply("openai", "I think sentence two is useful."))
    reworded = edited(1, "waits on input or output", "stalls on a socket read")
    mark = len(server.requests)
    notes = engine.condense(SQ, page(reworded))
    revision, reask, full = sent(server, mark)
    assert b"example 2 " not in revision and b"example 2 " in full
    assert reworded[1] in notes and LINES[1] not in notes


def test_without_a_memo_or_after_a_refresh_every_call_is_in_full(server: ScriptedServer) -> None:
    memo = CallMemo(None, ttl_hours=24)
    engine = engine_on(server, memo)
    engine.condense(SQ, page(LINES))
    memo.salt = "a-refresh-run"
    reworded = edited(1, "waits on input or output", "stalls on a socket read")
    mark = len(server.requests)
    engine.condense(SQ, page(reworded))
    [body] = sent(server, mark)
    assert b"example 2 " in body

    off = engine_on(server, CallMemo(None, ttl_hours=0))
    off.condense(SQ, page(LINES))
    mark = len(server.requests)
    off.condense(SQ, page(edited(0, "for 0 milliseconds", "for 9 milliseconds")))
    [body] = sent(server, mark)
    assert b"example 2 " in body


def test_a_choice_of_pages_stands_when_only_figures_changed(server: ScriptedServer) -> None:
    engine = engine_on(server, CallMemo(None, ttl_hours=24))
    hits = [SearchResult(url=f"https://sockets.example/{n}", title=f"{TITLE} {n}",
                         snippet="Timings of waiting.", rank=n) for n in range(1, 4)]
    first = engine.choose_pages(transcript(engine, page(LINES)), hits, 2)
    assert first == [0, 1]

    figure = transcript(engine, page(edited(0, "for 0 milliseconds", "for 9 milliseconds")))
    mark = len(server.requests)
    assert engine.choose_pages(figure, hits, 2) == first and sent(server, mark) == []

    words = transcript(engine, page(edited(1, "waits on input or output", "stalls")))
    mark = len(server.requests)
    assert engine.choose_pages(words, hits, 2) == first
    [body] = sent(server, mark)
    assert b"Choose which pages to read" in body  # asked again, in full


def test_a_page_condensed_in_pieces_is_revised_piece_by_piece(server: ScriptedServer) -> None:
    """A window too small for the page: it is condensed in pieces, and an edit in the second
    piece is asked about that sentence alone, while the first piece is served as it was."""
    chat = OpenAIChat(MODEL, api_key=SecretStr("sk-test-0123456789"), base_url=server.url + "/v1",
                      timeout=10)
    memo = CallMemo(None, ttl_hours=24)
    engine = LLMEngine(chat, limits=ContextLimits({MODEL: 1_100}, default=1_100),
                       estimator=TokenEstimator(), max_output_tokens=400,
                       revisions=Revisions(memo, chat))
    before = condense_with_shrink(engine, SQ, page(LINES))
    pieces = len(server.requests)
    assert pieces >= 2 and LINES[0] in before and LINES[19] in before

    reworded = edited(18, "waits on input or output", "stalls on a socket read")
    mark = len(server.requests)
    after = condense_with_shrink(engine, SQ, page(reworded))
    asked = sent(server, mark)
    assert len(asked) == 1  # the piece holding the edit; every other piece served from its record
    assert b"stalls on a socket read" in asked[0] and b"example 17 " not in asked[0]
    assert reworded[18] in after and LINES[18] not in after and LINES[0] in after
