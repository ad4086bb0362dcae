"""The research engine backed by any `core.llm` chat model.

Each role is one model call with a JSON answer validated by `core.engine.schemas` (prompt text
lives in `core.engine.prompts`). What the engine guarantees on top of the model:

- a malformed answer is re-asked once with the parse error, then raises `Fatal`: a plan, finding
  or report is never invented silently, and an error is never returned as content;
- a compare plan whose sub-questions each cover one option is re-asked once (seed 002 §5.4);
- every quote in a finding is checked against the page it came from and stored as the exact
  substring of that page's text; unverifiable quotes are dropped, titles come from the sources;
- before compressing, the request is estimated and compacted when over budget; a
  `ContextOverflow` from the provider still propagates, for the caller to shrink and retry.

It never numbers citations (`core.report` does) and never sleeps or retries on provider errors.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence, TypeVar

from pydantic import BaseModel

from core.engine import prompts
from core.engine.base import ReportDraft
from core.engine.answers import (InvalidOutput, draft_from, parse_answer, plan_complaint,
                                 strip_fence)
from core.engine.quotes import verified_claim
from core.engine.schemas import (CompressOut, ControllerOut, DraftOut, PlanOut, json_schema)
from core.ledger import acting_as
from core.llm.base import ChatModel, Completion
from core.models import (Finding, Message, ResearchPlan, Source, SubQuestion, Topic,
                         Transcript)
from core.overflow.compaction import (MIN_SUMMARY_BUDGET_TOKENS, CompactionFailed,
                                      compact_transcript, render_for_summary,
                                      truncate_tool_result, truncate_tool_results)
from core.overflow.limits import ContextLimits
from core.overflow.shrink import SAFETY_MARGIN, fit_tool_results, render_findings
from core.overflow.signals import Fatal
from core.overflow.tokens import TokenEstimator, content_bytes, default_estimator

Out = TypeVar("Out", bound=BaseModel)

MAX_SUBQUESTIONS = 6
MAX_NEXT_QUERIES = 3
# Pre-flight for the output side: a role never asks for more output than this share of the
# model's request budget, so its input keeps room and a known window costs no failed call.
OUTPUT_SHARE = {"plan": 0.5, "queries": 0.25, "condense": 0.3, "checkpoint": 0.4,
                "compress": 0.3, "report": 0.5}
QUERIES_MAX_OUTPUT = 1_024  # a JSON list of three short queries

log = logging.getLogger("researchflow.engine")


class LLMEngine:
    """`ResearchEngine` over a `ChatModel`. Safe to share between worker threads."""

    def __init__(self, model: ChatModel, *, limits: ContextLimits | None = None,
                 estimator: TokenEstimator | None = None, max_output_tokens: int = 4096,
                 spill_dir: Path | str | None = None) -> None:
        self.model = model
        self.name = f"llm:{model.provider}:{model.model}"
        self.limits = limits if limits is not None else ContextLimits()
        self.estimator = estimator if estimator is not None else default_estimator()
        self.max_output_tokens = max_output_tokens
        self.spill_dir = Path(spill_dir) if spill_dir is not None else None

    def for_role(self, role: str) -> "LLMEngine":
        return self

    def context_window(self) -> int | None:
        return self.limits.window(self.model.model)

    def request_budget(self) -> int:
        """Tokens one request (input + output) may use now: the window, or a learned TPM cap."""
        return self.limits.request_budget(self.model.model)

    def output_tokens(self, role: str, max_tokens: int | None = None) -> int:
        """The output cap a role's call would ask for (see OUTPUT_SHARE)."""
        return self._out_tokens(max_tokens, role)

    def chars_for(self, tokens: int, sample: str) -> int:
        """How many characters of text like `sample` make `tokens` tokens for this model."""
        return self._chars(tokens, sample)

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan:
        high = min(topic.max_subquestions, MAX_SUBQUESTIONS)
        low = min(3, high)
        messages = [Message(role="system", content=prompts.plan_system(low, high)),
                    Message(role="user", content=prompts.plan_user(topic.text, low, high))]
        tokens = self._out_tokens(max_tokens, "plan")
        out, convo = self._ask(messages, PlanOut, what="research plan", max_tokens=tokens)
        complaint = plan_complaint(out, low)
        if complaint:
            try:  # one re-ask with the complaint; whatever valid plan comes back is accepted
                out, _ = self._ask([*convo, Message(role="user", content=complaint)], PlanOut,
                                   what="research plan", reask=False, max_tokens=tokens)
            except InvalidOutput:
                pass  # the first plan was valid JSON: keep it rather than fail the topic
        subqs = tuple(SubQuestion(index=i, question=sq.question.strip(),
                                  queries=tuple(sq.queries) or (sq.question.strip(),))
                      for i, sq in enumerate(out.subquestions[:high]))
        targets = tuple(out.targets) if out.intent == "compare" else ()
        return ResearchPlan(topic=topic.text.strip(), brief=out.brief.strip(), intent=out.intent,
                            targets=targets, subquestions=subqs)

    # -- research rounds ----------------------------------------------------------------------
    def next_queries(self, transcript: Transcript, round_index: int, *,
                     max_tokens: int | None = None, scale: float = 1.0) -> list[str]:
        """`scale` (< 1 after an overflow without numbers) shrinks the room for the notes."""
        sq = transcript.subquestion
        system = Message(role="system", content=prompts.CONTROLLER_SYSTEM)
        frame = prompts.controller_user(sq.question, round_index, transcript.queries_run, "")
        tokens = self._out_tokens(max_tokens or QUERIES_MAX_OUTPUT, "queries")
        schema = self._tokens(json.dumps(json_schema(ControllerOut)))
        notes = self._fit_text(_notes(transcript), [system, Message(role="user", content=frame)],
                               tokens, reserve=schema, scale=scale)
        user = prompts.controller_user(sq.question, round_index, transcript.queries_run, notes)
        out, _ = self._ask([system, Message(role="user", content=user)], ControllerOut,
                           what="decision on further searches", max_tokens=tokens)
        if out.enough:
            return []
        seen = {_query_key(q) for q in transcript.queries_run}
        fresh: list[str] = []
        for q in out.queries:
            if _query_key(q) not in seen:
                seen.add(_query_key(q))
                fresh.append(q)
        return fresh[:MAX_NEXT_QUERIES]

    def condense(self, subquestion: SubQuestion, source: Source, *,
                 max_tokens: int | None = None) -> str:
        """Notes on one page (or one chunk of a page: `core.overflow.recovery` chunks a page
        bigger than the window before it gets here; the cut below is the last safety net)."""
        system = Message(role="system", content=prompts.CONDENSE_SYSTEM)
        tokens = self._out_tokens(max_tokens, "condense")
        frame = prompts.condense_user(subquestion.question, source.title, source.url, "")
        page = self._fit_text(source.text, [system, Message(role="user", content=frame)],
                              tokens)
        messages = [system, Message(role="user",
                                    content=prompts.condense_user(subquestion.question,
                                                                  source.title, source.url,
                                                                  page))]
        completion = self._call(messages, max_tokens=tokens)
        if completion.truncated:
            # Never silent: ask again with the largest cap that still fits, once.
            bigger = self._out_room(messages)
            if bigger > tokens:
                completion = self._call(messages, max_tokens=bigger)
            if completion.truncated:
                log.warning("notes on %s were cut at %d output tokens; keeping what came",
                            source.url, max(bigger, tokens))
        text = strip_fence(completion.text).strip()
        return "" if text.strip(" .").upper() == prompts.CONDENSE_NONE else text

    def condense_room(self, subquestion: SubQuestion, source: Source, *,
                      max_tokens: int | None = None) -> int:
        """Tokens of page text one condense call can take at the current limits."""
        system = Message(role="system", content=prompts.CONDENSE_SYSTEM)
        frame = prompts.condense_user(subquestion.question, source.title, source.url, "")
        tokens = self._out_tokens(max_tokens, "condense")
        return max(0, self._input_budget(tokens)
                   - self._tokens([system, Message(role="user", content=frame)]))

    # -- compress -----------------------------------------------------------------------------
    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        out_tokens = self._out_tokens(max_tokens, "compress")
        sq = transcript.subquestion
        # The instruction goes first: compaction keeps the first message intact.
        head = [Message(role="system", content=prompts.compress_system(sq.question)),
                *transcript.messages]
        request = Message(role="user", content=prompts.COMPRESS_REQUEST)
        schema = json_schema(CompressOut)
        budget = (self._input_budget(out_tokens) - self._tokens(request)
                  - self._tokens(json.dumps(schema)))
        if self._tokens(head) > budget:
            head = self._compact(head, budget)
        out, _ = self._ask([*head, request], CompressOut, what="finding", max_tokens=out_tokens)
        claims = tuple(verified_claim(c.text, c.evidence, c.confidence, transcript.sources)
                       for c in out.claims)
        return Finding(subquestion_index=sq.index, subquestion=sq.question, claims=claims,
                       raw_notes=_notes(transcript))

    # -- report -------------------------------------------------------------------------------
    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        out_tokens = self._out_tokens(max_tokens, "report")
        messages = [Message(role="system", content=prompts.REPORT_SYSTEM),
                    Message(role="user",
                            content=prompts.report_user(plan, render_findings(findings)))]
        out, _ = self._ask(messages, DraftOut, what="report", max_tokens=out_tokens)
        return draft_from(plan, out)

    def report_frame_tokens(self, plan: ResearchPlan) -> int:
        """Estimated tokens of the report request around the findings: prompts, plan, schema.

        The shrink loop budgets the findings against what is left of the window after this.
        """
        frame = [Message(role="system", content=prompts.REPORT_SYSTEM),
                 Message(role="user", content=prompts.report_user(plan, ""))]
        schema = json.dumps(json_schema(DraftOut))
        return (self.estimator.estimate(frame, model=self.model.model)
                + self.estimator.estimate(schema, model=self.model.model))

    # -- model calls --------------------------------------------------------------------------
    def _call(self, messages: Sequence[Message], *, max_tokens: int,
              schema: dict[str, Any] | None = None) -> Completion:
        """One call; ContextOverflow and every other signal propagate untouched."""
        completion = self.model.complete(messages, max_tokens=max_tokens, json_schema=schema)
        sent = content_bytes(messages) + (len(json.dumps(schema)) if schema else 0)
        self.estimator.calibrate(sent, completion.usage.input_tokens, model=self.model.model)
        return completion

    def _ask(self, messages: list[Message], shape: type[Out], *, what: str,
             max_tokens: int | None = None, reask: bool = True) -> tuple[Out, list[Message]]:
        """Ask for JSON of `shape`; on a bad answer re-ask once, then give up.

        An answer cut at its output cap is asked again with the largest cap that still fits the
        window, or, when there is no such room, with a request to answer more concisely; any
        other bad answer is re-asked with the parse error.

        Returns the parsed answer and the conversation including it (for a follow-up complaint).
        Without `reask`, a bad answer raises `InvalidOutput` at once.
        """
        schema = json_schema(shape)
        tokens = self._out_tokens(max_tokens)
        for attempt in range(2 if reask else 1):
            completion = self._call(messages, max_tokens=tokens, schema=schema)
            answered = [*messages, Message(role="assistant", content=completion.text)]
            try:
                return parse_answer(completion.text, shape), answered
            except InvalidOutput as exc:
                error = exc
            if attempt == 0 and reask:
                truncated = completion.truncated
                room = self._out_room(messages) if truncated else 0
                if room > tokens * 1.25:
                    tokens = room  # the same question with a larger cap that still fits
                    continue
                messages = [*answered, Message(role="user", content=prompts.complaint_invalid_json(
                    str(error), truncated))]
        if not reask:
            raise error
        raise Fatal(f"{self.name}: the model could not produce a valid {what} "
                    f"(twice an invalid answer; last error: {error})",
                    provider=self.model.provider, model=self.model.model,
                    hint="try a stronger model, or one that supports structured output")

    # -- budgets ------------------------------------------------------------------------------
    def _tokens(self, content: str | Message | Sequence[Message]) -> int:
        return self.estimator.estimate(content, model=self.model.model)

    def _input_budget(self, out_tokens: int) -> int:
        # The margin covers the gap between our estimate and the provider's tokenizer; the
        # output side counts what the backend really sends (thinking allowance included).
        budget = int(self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN))
        if not self._window_holds_output():
            return budget
        return max(0, budget - self._sent_cap(out_tokens))

    def _window_holds_output(self) -> bool:
        return bool(getattr(self.model, "window_includes_output", True))

    def _sent_cap(self, out_tokens: int) -> int:
        cap = getattr(self.model, "output_cap", None)
        return cap(out_tokens) if callable(cap) else out_tokens

    def _out_tokens(self, max_tokens: int | None, role: str = "report") -> int:
        """The caller's max_tokens, else the default; never above the model's known output cap,
        nor above the role's share of the request budget (the output-side pre-flight)."""
        tokens = max_tokens or self.max_output_tokens
        cap = self.limits.max_output(self.model.model)
        if cap:
            tokens = min(tokens, cap)
        budget = self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN)
        return max(1, min(tokens, int(budget * OUTPUT_SHARE.get(role, 0.5))))

    def _out_room(self, messages: Sequence[Message]) -> int:
        """The largest output that fits beside `messages` (for a truncated answer's re-ask)."""
        budget = int(self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN))
        cap = self.limits.max_output(self.model.model)
        if not self._window_holds_output():
            return cap or budget
        room = budget - self._tokens(messages) - (self._sent_cap(1) - 1)  # thinking stays
        return max(0, min(room, cap) if cap else room)

    def _chars(self, tokens: int, sample: str) -> int:
        ratio = self.estimator.chars_per_token(sample[:4000], model=self.model.model)
        return max(0, int(tokens * ratio))

    def _fit_text(self, text: str, frame: Sequence[Message], out_tokens: int, *,
                  reserve: int = 0, scale: float = 1.0) -> str:
        """`text` cut (head + tail, spilled to disk when asked) to fit beside `frame`, leaving
        `reserve` tokens (an output schema) and using `scale` of the room that is left."""
        room = int((self._input_budget(out_tokens) - self._tokens(frame) - reserve) * scale)
        if self._tokens(text) <= room:
            return text
        return truncate_tool_result(text, self._chars(room, text), self.spill_dir)

    def _compact(self, messages: list[Message], budget: int) -> list[Message]:
        """The pre-emptive path (seed 003): cap tool results, then checkpoint older turns.

        Each step keeps the first message (the compression instruction) and never splits a tool
        call from its result. If even the smallest form is over budget it is sent anyway: the
        provider's ContextOverflow then reaches the caller, which shrinks harder.
        """
        # Search listings are not evidence: they go first (the calls stay paired with a stub).
        messages = [m.model_copy(update={"content": "[search results omitted to fit the window]"})
                    if m.role == "tool" and m.name == "search" else m for m in messages]
        if self._tokens(messages) <= budget:
            return messages
        # The notes are the evidence, so cut every page's notes head + tail to the largest cap
        # that fits before summarizing anything: a summary cannot be quoted verbatim.
        target = self.estimator.tokens_to_bytes(budget, model=self.model.model)
        capped = fit_tool_results(messages, target, spill_dir=self.spill_dir)
        if capped is not None and self._tokens(capped) <= budget:
            return capped
        sample = "".join(m.content for m in messages[1:])
        best = truncate_tool_results(messages, max(2_000, self._chars(budget // 8, sample)),
                                     self.spill_dir)
        for keep_recent in (8, 4, 0):
            try:
                best = compact_transcript(best, keep_recent=keep_recent,
                                          summarize=self._summarize,
                                          budget_tokens=max(MIN_SUMMARY_BUDGET_TOKENS, budget // 2),
                                          estimator=self.estimator, model=self.model.model)
            except CompactionFailed:
                break
            if self._tokens(best) <= budget:
                break
        return best

    def _summarize(self, batch: list[Message], prior: str | None) -> str:
        """Compaction's summarizer: the engine's own model writes the checkpoint."""
        with acting_as("checkpoint"):
            return self._summarize_turns(batch, prior)

    def _summarize_turns(self, batch: list[Message], prior: str | None) -> str:
        messages = [Message(role="system", content=prompts.CHECKPOINT_SYSTEM),
                    Message(role="user",
                            content=prompts.checkpoint_user(render_for_summary(batch), prior))]
        return self._call(messages, max_tokens=self._out_tokens(None, "checkpoint")).text


def _query_key(query: str) -> str:
    return " ".join(query.lower().split())


def _notes(transcript: Transcript) -> str:
    """The condensed page notes (tool results other than search listings), oldest first."""
    return "\n\n".join(m.content.strip() for m in transcript.messages
                       if m.role == "tool" and m.name != "search" and m.content.strip())
