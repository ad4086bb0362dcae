"""The LLM engine's own logic, over a queueable fake chat model.

The fake implements the `ChatModel` protocol: it returns queued texts (or raises queued
exceptions) and records every request, so these tests check what the engine sends and what it
makes of the answers: parsing, re-asks, quote verification, budgets. The real SDK path is in
tests/contract/test_llm_engine_openai.py.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence, Union

import pytest

from core.engine.base import ResearchEngine
from core.engine.model_driven.llm_engine import LLMEngine
from core.overflow.windows import ContextLimits, ModelLimits
from core.llm.base import Completion, Usage
from core.models import (Claim, Evidence, Finding, Message, ResearchPlan, Source, SubQuestion,
                         ToolCall, Topic, Transcript)
from core.reports.report import evidence_catalog
from core.signals import ContextOverflow, Fatal
from core.overflow.tokens import TokenEstimator, content_bytes


# A queued reply: a text, a Completion, an exception to raise, or a function of the messages
# (which stays at the head of the queue and answers every later call).
Reply = Union[str, Exception, Completion, Callable[[Sequence[Message]], Union[str, Completion]]]


@dataclass
class Sent:
    messages: list[Message]
    max_tokens: int
    json_schema: dict[str, Any] | None


class QueueModel:
    """A ChatModel that answers from a queue and records what it was sent."""

    provider: ClassVar[str] = "fake"
    key_env_var: ClassVar[str | None] = None

    def __init__(self, *replies: Reply, model: str = "fake-1") -> None:
        self.model = model
        self.replies: deque[Reply] = deque(replies)
        self.sent: list[Sent] = []


    def complete(self, messages: Sequence[Message], *, max_tokens: int,
                 json_schema: dict[str, Any] | None = None,
                 temperature: float = 0.0) -> Completion:
        self.sent.append(Sent(list(messages), max_tokens, json_schema))
        reply = self.replies[0](messages) if callable(self.replies[0]) else self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, Completion):
            return reply
        return Completion(text=reply, model=self.model)


def engine_for(model: QueueModel, window: int = 128_000, **kw: Any) -> LLMEngine:
    return LLMEngine(model, limits=ContextLimits({model.model: window}, default=window),
                     estimator=TokenEstimator(), **kw)


def plan_json(subquestions: list[str], *, intent: str = "describe",
              targets: Sequence[str] = ()) -> str:
    return json.dumps({"brief": "What the user wants.", "intent": intent, "targets": list(targets),
                       "subquestions": [{"question": q, "queries": [f"q {i}", f"r {i}"]}
                                        for i, q in enumerate(subquestions)]})


# -- plan -------------------------------------------------------------------------------------

def test_engine_satisfies_protocol_and_is_named_by_provider_and_model() -> None:
    engine = engine_for(QueueModel())
    assert isinstance(engine, ResearchEngine)
    assert engine.name == "llm:fake:fake-1"


def test_plan_parses_fenced_json_and_sends_a_schema() -> None:
    text = plan_json(["How fast is X?", "What does X cost?", "Who maintains X?"])
    model = QueueModel(f"Here you go:\n```json\n{text}\n```")
    plan = engine_for(model).plan(Topic(text="Tell me about X", max_subquestions=5))

    assert [sq.index for sq in plan.subquestions] == [0, 1, 2]
    assert plan.subquestions[1].question == "What does X cost?"
    assert plan.subquestions[1].queries == ("q 1", "r 1")
    assert plan.intent == "describe" and plan.targets == ()
    assert plan.topic == "Tell me about X"
    assert len(model.sent) == 1
    assert "subquestions" in json.dumps(model.sent[0].json_schema)
    assert "between 3 and 5" in model.sent[0].messages[-1].content


def test_plan_caps_subquestions_at_the_topic_maximum() -> None:
    model = QueueModel(plan_json([f"Question number {i}?" for i in range(5)]))
    plan = engine_for(model).plan(Topic(text="Tell me about X", max_subquestions=2))
    assert len(plan.subquestions) == 2
    assert "exactly 2" in model.sent[0].messages[-1].content


def test_compare_plan_with_one_option_per_subquestion_is_reasked_with_the_complaint() -> None:
    per_option = plan_json(["What is Milvus?", "What is Qdrant?", "What is Weaviate?"],
                           intent="compare", targets=["Milvus", "Qdrant", "Weaviate"])
    dimensions = plan_json(["How do Milvus, Qdrant and Weaviate differ in query latency?",
                            "How do their licences differ?",
                            "How do Milvus, Qdrant and Weaviate compare on hosting cost?"],
                           intent="compare", targets=["Milvus", "Qdrant", "Weaviate"])
    model = QueueModel(per_option, dimensions)
    plan = engine_for(model).plan(Topic(text="Milvus vs Qdrant vs Weaviate"))

    assert len(model.sent) == 2
    complaint = model.sent[1].messages[-1]
    assert complaint.role == "user"
    assert "What is Qdrant?" in complaint.content and "dimension" in complaint.content
    assert model.sent[1].messages[-2].content == per_option  # the model sees its own answer
    assert plan.intent == "compare"
    assert plan.targets == ("Milvus", "Qdrant", "Weaviate")
    assert plan.subquestions[1].question == "How do their licences differ?"
    assert "DIMENSION OF DIFFERENCE" in model.sent[0].messages[0].content


def test_compare_plan_is_reasked_only_once_then_accepted() -> None:
    per_option = plan_json(["What is A?", "What is B?", "How do A and B differ?"],
                           intent="compare", targets=["A", "B"])
    model = QueueModel(per_option, per_option)
    plan = engine_for(model).plan(Topic(text="A versus B"))
    assert len(model.sent) == 2
    assert plan.subquestions[0].question == "What is A?"


def test_invalid_json_is_reasked_once() -> None:
    model = QueueModel('{"brief": "x", "subquestions": [',
                       plan_json(["Why a?", "Why b?", "Why c?"]))
    plan = engine_for(model).plan(Topic(text="Tell me about X"))
    assert len(plan.subquestions) == 3
    assert "not valid JSON" in model.sent[1].messages[-1].content


def test_invalid_json_twice_is_fatal_and_no_plan_is_invented() -> None:
    model = QueueModel("I cannot help with that.", '{"brief": ""}')
    with pytest.raises(Fatal, match="could not produce a valid research plan"):
        engine_for(model).plan(Topic(text="Tell me about X"))
    assert len(model.sent) == 2


def test_context_overflow_from_the_model_propagates_unchanged() -> None:
    overflow = ContextOverflow("too long", limit=100, requested=200, provider="fake")
    model = QueueModel(overflow)
    with pytest.raises(ContextOverflow) as info:
        engine_for(model).plan(Topic(text="Tell me about X"))
    assert info.value is overflow


# -- research rounds -------------------------------------------------------------------------

def transcript_with(sources: Sequence[Source], queries: Sequence[str] = ("first query",)
                    ) -> Transcript:
    sq = SubQuestion(index=2, question="How heavy is the fox?", queries=tuple(queries))
    t = Transcript(subquestion=sq, queries_run=list(queries))
    t.messages.append(Message(role="assistant", tool_calls=(
        ToolCall(id="s0", name="search", arguments={"query": queries[0]}),)))
    t.messages.append(Message(role="tool", tool_call_id="s0", name="search",
                              content="1. Foxes <https://a.example/fox> snippet"))
    calls = tuple(ToolCall(id=f"f{i}", name="read", arguments={"url": s.url})
                  for i, s in enumerate(sources))
    t.messages.append(Message(role="assistant", tool_calls=calls))
    for call, s in zip(calls, sources):
        t.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                  content=f"Source: {s.title} <{s.url}>\n{s.text[:80]}"))
        t.sources.append(s)
    return t


FOX = Source(url="https://a.example/fox", title="All about foxes",
             text="Foxes are small.  The   quick\nbrown fox weighs 12 kg on average. It runs fast.")
HEN = Source(url="https://b.example/hen", title="Hens", text="A hen lays about 300 eggs a year.")


def test_next_queries_never_repeats_a_query_already_run() -> None:
    model = QueueModel(json.dumps({"enough": False,
                                   "queries": ["First  Query", "fox weight kg", "fox weight kg"]}))
    queries = engine_for(model).next_queries(transcript_with([FOX]), 1)
    assert queries == ["fox weight kg"]
    prompt = model.sent[0].messages[-1].content
    assert "first query" in prompt and "12 kg" in prompt  # queries run and notes so far


def test_next_queries_is_empty_when_the_model_says_enough() -> None:
    model = QueueModel(json.dumps({"enough": True, "queries": ["more"]}))
    assert engine_for(model).next_queries(transcript_with([FOX]), 1) == []


def test_condense_returns_nothing_for_no_ids_and_cuts_a_page_to_the_window() -> None:
    model = QueueModel('{"ids": [], "note": ""}', '{"ids": [1, 99999], "note": "Weights."}')
    engine = engine_for(model, window=3_000, max_output_tokens=500)
    sq = SubQuestion(index=0, question="How heavy is the fox?")
    assert engine.condense(sq, FOX) == ""

    page = Source(url="https://big.example", title="Big",
                  text="HEAD filler sentence. " + "filler sentence. " * 5_000 + " TAIL of the page.")
    # The note, then the page's own sentence 1; an id the model never saw is ignored.
    assert engine.condense(sq, page) == "(Weights.)\nHEAD filler sentence."
    sent = model.sent[1].messages
    est = TokenEstimator()
    assert est.estimate(sent) + 500 <= ContextLimits({}, default=3_000).request_budget("fake-1")
    assert "HEAD" in sent[-1].content and "TAIL" in sent[-1].content  # head and tail kept


# -- compress -------------------------------------------------------------------------------

def compress_reply(claims: list[dict[str, Any]]) -> str:
    return json.dumps({"claims": claims})


def test_compress_keeps_verified_quotes_verbatim_and_drops_fabricated_ones() -> None:
    reply = compress_reply([
        {"text": "A fox weighs 12 kg.", "confidence": "high", "evidence": [
            {"url": FOX.url, "quote": "The quick brown fox weighs 12 kg", "title": "Wrong"},
            {"url": FOX.url, "quote": "The fox weighs 40 kg."}]},
        {"text": "Foxes fly.", "confidence": "high", "evidence": [
            {"url": HEN.url, "quote": "Foxes can fly."}]},
        {"text": "Hens lay about 300 eggs.", "confidence": "medium", "evidence": [
            {"url": "https://a.example/fox/", "quote": "A hen lays about 300 eggs a year."}]},
    ])
    model = QueueModel(f"```json\n{reply}\n```")
    finding = engine_for(model).compress(transcript_with([FOX, HEN]))

    fox, fly, hen = finding.claims
    assert fox.evidence == (Evidence(url=FOX.url, title="All about foxes",
                                     quote="The   quick\nbrown fox weighs 12 kg"),)
    assert fox.evidence[0].quote in FOX.text
    assert fox.confidence == "high"
    assert fly.evidence == () and fly.confidence == "medium"  # nothing verified: not "high"
    # the quote is in another page than the one named: attributed to the page that holds it
    assert hen.evidence == (Evidence(url=HEN.url, title="Hens",
                                     quote="A hen lays about 300 eggs a year."),)
    assert finding.subquestion_index == 2 and finding.subquestion == "How heavy is the fox?"
    assert "12 kg" in finding.raw_notes and "snippet" not in finding.raw_notes


def test_compress_sends_the_instruction_first_and_the_request_last() -> None:
    model = QueueModel(compress_reply([]))
    transcript = transcript_with([FOX])
    engine_for(model).compress(transcript, max_tokens=321)

    sent = model.sent[0]
    assert sent.messages[0].role == "system"
    assert "compressing a researcher's working notes" in sent.messages[0].content
    assert "How heavy is the fox?" in sent.messages[0].content
    assert sent.messages[1:-1] == transcript.messages
    assert sent.messages[-1].role == "user" and sent.messages[-1].content.startswith("Now compress")
    assert sent.max_tokens == 321


def test_compress_compacts_an_oversized_transcript_before_calling() -> None:
    pages = [Source(url=f"https://p{i}.example", title=f"P{i}",
                    text=f"Page {i} says the fox weighs {i} kg. " + "padding words here. " * 400)
             for i in range(40)]  # so many pages that cutting each one's notes is not enough
    transcript = transcript_with(pages)
    for m in list(transcript.messages):  # long notes, as a researcher with big pages makes
        if m.role == "tool" and m.name == "read":
            idx = transcript.messages.index(m)
            transcript.messages[idx] = m.model_copy(update={"content": m.content + " x" * 3_000})
    final = compress_reply([{"text": "Page 7 says 7 kg.", "evidence": [
        {"url": "https://p7.example", "quote": "Page 7 says the fox weighs 7 kg."}]}])

    def respond(messages: Sequence[Message]) -> str:
        if messages[-1].content.startswith("Now compress"):
            return final
        return "Searched fox weight. <https://p7.example> Page 7 says the fox weighs 7 kg."

    model = QueueModel(respond, model="small")
    engine = engine_for(model, window=6_000, max_output_tokens=400)
    assert engine.estimator.estimate([Message(role="system", content="x"), *transcript.messages]) \
        > 6_000
    finding = engine.compress(transcript)

    last = model.sent[-1].messages
    summaries = [c for c in model.sent[:-1] if "checkpoint" in c.messages[0].content]
    assert summaries  # the model itself summarized older turns before the compression
    assert any(m.name == "checkpoint" for m in last)
    assert "compressing a researcher's working notes" in last[0].content
    assert engine.estimator.estimate(last) + 400 <= ContextLimits({}, default=6_000) \
        .request_budget("small")
    assert finding.claims[0].evidence[0].quote == "Page 7 says the fox weighs 7 kg."


def test_compress_first_cuts_each_pages_notes_when_that_fits() -> None:
    pages = [Source(url=f"https://p{i}.example", title=f"P{i}",
                    text=f"Page {i} says the fox weighs {i} kg. " + "padding words here. " * 400)
             for i in range(4)]
    transcript = transcript_with(pages)
    for i, m in enumerate(transcript.messages):
        if m.role == "tool" and m.name == "read":
            transcript.messages[i] = m.model_copy(update={"content": m.content + " x" * 3_000})
    model = QueueModel(compress_reply([]))
    engine = engine_for(model, window=6_000, max_output_tokens=400)
    engine.compress(transcript)
    sent = model.sent[-1].messages
    assert len(model.sent) == 1  # no summarizer call: the notes were cut head + tail instead
    reads = [m for m in sent if m.role == "tool" and m.name == "read"]
    assert len(reads) == 4 and all("chars omitted" in m.content for m in reads)
    assert all(m.content.startswith("Source: P") for m in reads)  # heads kept: quotes survive


def test_output_tokens_never_exceed_the_models_known_cap() -> None:
    model = QueueModel(compress_reply([]), compress_reply([]))
    engine = LLMEngine(model, limits=ContextLimits(known={"fake-1": ModelLimits(32_000, 2_000)}),
                       estimator=TokenEstimator(), max_output_tokens=8_000)
    engine.compress(transcript_with([FOX]))
    engine.compress(transcript_with([FOX]), max_tokens=900)
    assert [s.max_tokens for s in model.sent] == [2_000, 900]


def test_compress_overflow_propagates_unchanged() -> None:
    overflow = ContextOverflow("prompt is too long", limit=1000, requested=5000)
    model = QueueModel(overflow)
    with pytest.raises(ContextOverflow) as info:
        engine_for(model).compress(transcript_with([FOX]))
    assert info.value is overflow


def test_usage_calibrates_the_estimator() -> None:
    def respond(messages: Sequence[Message]) -> Completion:
        # a tokenizer at ~2 bytes per token, denser than the default guess of 3
        return Completion(text=compress_reply([]), model="fake-1",
                          usage=Usage(input_tokens=content_bytes(messages) // 2, output_tokens=3))

    engine = engine_for(QueueModel(respond))
    assert engine.estimator.bytes_per_token("fake-1") == 3.0
    engine.compress(transcript_with([FOX]))
    assert 2.0 < engine.estimator.bytes_per_token("fake-1") < 3.0


# -- write report -----------------------------------------------------------------------------

def make_findings() -> list[Finding]:
    ev = [Evidence(url=FOX.url, title=FOX.title, quote="brown fox weighs 12 kg"),
          Evidence(url=HEN.url, title=HEN.title, quote="A hen lays about 300 eggs a year."),
          Evidence(url=FOX.url, title=FOX.title, quote="It runs fast.")]
    return [Finding(subquestion_index=0, subquestion="How heavy?", claims=(
                Claim(text="A fox weighs 12 kg.", evidence=(ev[0],), confidence="medium"),
                Claim(text="Hens lay 300 eggs.", evidence=(ev[1],), confidence="medium"))),
            Finding(subquestion_index=1, subquestion="How fast?", claims=(
                Claim(text="Foxes run fast.", evidence=(ev[2],), confidence="high"),))]


def make_plan(intent: str = "describe") -> ResearchPlan:
    return ResearchPlan(topic="Foxes and hens", brief="Compare them.", intent=intent,
                        targets=("fox", "hen") if intent == "compare" else (),
                        subquestions=(SubQuestion(index=0, question="How heavy?"),
                                      SubQuestion(index=1, question="How fast?")))


def draft_markdown(table: str = "| x | fox | hen |") -> str:
    return "\n".join(["# Foxes", "## [summary] Executive summary", "Foxes weigh 12 kg [E1].",
                      "## [comparison] Side by side", table, "## [S1] Weight",
                      "A fox weighs 12 kg [E1].", "## [S2] Speed", "Foxes run fast [E3].",
                      "## [conclusion] In the end", "Foxes are heavy and fast [E1][E3]."])


def test_write_report_prompt_cites_the_same_keys_as_the_evidence_catalog() -> None:
    model = QueueModel(draft_markdown())
    findings = make_findings()
    plan = make_plan().model_copy(update={"report_words": 200})
    draft = engine_for(model).write_report(plan, findings, max_tokens=777)

    prompt = model.sent[0].messages[-1].content
    assert set(re.findall(r"\[(E\d+)\]", prompt)) == {k for k, _ in evidence_catalog(findings)}
    for key, ev in evidence_catalog(findings):  # each key sits next to its own quote
        line = next(l for l in prompt.splitlines() if f"[{key}]" in l)
        assert ev.quote in line or ev.quote in prompt.split(f"[{key}]", 1)[1][:400]
    assert "How fast?" in prompt and "Compare them." in prompt and "about 200 words" in prompt
    assert model.sent[0].max_tokens == 777 and model.sent[0].json_schema is None  # markdown
    assert [(s.subquestion_index, s.heading) for s in draft.sections] == [(0, "Weight"),
                                                                          (1, "Speed")]
    assert draft.summary == "Foxes weigh 12 kg [E1]."
    assert (draft.conclusion, draft.heading("conclusion")) == (
        "Foxes are heavy and fast [E1][E3].", "In the end")
    assert draft.comparison_table is None  # describe intent: no table even if the model sent one


def test_write_report_keeps_the_table_for_compare() -> None:
    model = QueueModel(draft_markdown())
    plan = make_plan("compare").model_copy(update={"report_words": 200})
    draft = engine_for(model).write_report(plan, make_findings())
    assert [s.subquestion_index for s in draft.sections] == [0, 1]
    assert draft.comparison_table == "| x | fox | hen |"
    assert "Targets: fox, hen" in model.sent[0].messages[-1].content
    assert "## [comparison]" in model.sent[0].messages[-1].content  # the outline asks for it


def test_write_report_without_the_outline_twice_is_fatal() -> None:
    model = QueueModel('{"summary": "no title"}', "nope")
    with pytest.raises(Fatal, match="follows the outline"):
        engine_for(model).write_report(make_plan(), make_findings())
    assert "did not follow the outline" in model.sent[1].messages[-1].content
