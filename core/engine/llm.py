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
import re
from pathlib import Path
from typing import Any, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from core.compaction import (MIN_SUMMARY_BUDGET_TOKENS, CompactionFailed, compact_transcript,
                             render_for_summary, truncate_tool_result, truncate_tool_results)
from core.engine import prompts
from core.engine.base import ReportDraft, SectionDraft
from core.engine.schemas import (CompressOut, ControllerOut, DraftOut, EvidenceOut, PlanOut,
                                 json_schema)
from core.ledger import acting_as
from core.limits import ContextLimits
from core.llm.base import ChatModel, Completion
from core.models import (Claim, Evidence, Finding, Message, ResearchPlan, Source, SubQuestion,
                         Topic, Transcript)
from core.shrink import SAFETY_MARGIN, fit_tool_results, render_findings
from core.signals import Fatal
from core.tokens import TokenEstimator, content_bytes, default_estimator

Out = TypeVar("Out", bound=BaseModel)

MAX_SUBQUESTIONS = 6
MAX_NEXT_QUERIES = 3
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…|\[\.\.\.\])\s*")
# Typographic variants a model "corrects" while copying; each maps to one character, so
# positions in the normalised text map straight back to the page.
_CHAR_FOLD = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "–": "-",
                            "—": "-", "\u00a0": " "})


class _InvalidOutput(ValueError):
    """The model's answer did not parse into the requested shape."""


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

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, topic: Topic) -> ResearchPlan:
        high = min(topic.max_subquestions, MAX_SUBQUESTIONS)
        low = min(3, high)
        messages = [Message(role="system", content=prompts.plan_system(low, high)),
                    Message(role="user", content=prompts.plan_user(topic.text, low, high))]
        out, convo = self._ask(messages, PlanOut, what="research plan")
        complaint = _plan_complaint(out, low)
        if complaint:
            try:  # one re-ask with the complaint; whatever valid plan comes back is accepted
                out, _ = self._ask([*convo, Message(role="user", content=complaint)], PlanOut,
                                   what="research plan", reask=False)
            except _InvalidOutput:
                pass  # the first plan was valid JSON: keep it rather than fail the topic
        subqs = tuple(SubQuestion(index=i, question=sq.question.strip(),
                                  queries=tuple(sq.queries) or (sq.question.strip(),))
                      for i, sq in enumerate(out.subquestions[:high]))
        targets = tuple(out.targets) if out.intent == "compare" else ()
        return ResearchPlan(topic=topic.text.strip(), brief=out.brief.strip(), intent=out.intent,
                            targets=targets, subquestions=subqs)

    # -- research rounds ----------------------------------------------------------------------
    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]:
        sq = transcript.subquestion
        system = Message(role="system", content=prompts.CONTROLLER_SYSTEM)
        frame = prompts.controller_user(sq.question, round_index, transcript.queries_run, "")
        notes = self._fit_text(_notes(transcript), [system, Message(role="user", content=frame)],
                               self._out_tokens(None))
        user = prompts.controller_user(sq.question, round_index, transcript.queries_run, notes)
        out, _ = self._ask([system, Message(role="user", content=user)], ControllerOut,
                           what="decision on further searches")
        if out.enough:
            return []
        seen = {_query_key(q) for q in transcript.queries_run}
        fresh: list[str] = []
        for q in out.queries:
            if _query_key(q) not in seen:
                seen.add(_query_key(q))
                fresh.append(q)
        return fresh[:MAX_NEXT_QUERIES]

    def condense(self, subquestion: SubQuestion, source: Source) -> str:
        system = Message(role="system", content=prompts.CONDENSE_SYSTEM)
        frame = prompts.condense_user(subquestion.question, source.title, source.url, "")
        page = self._fit_text(source.text, [system, Message(role="user", content=frame)],
                              self._out_tokens(None))
        user = prompts.condense_user(subquestion.question, source.title, source.url, page)
        completion = self._call([system, Message(role="user", content=user)],
                                max_tokens=self._out_tokens(None))
        text = _strip_fence(completion.text).strip()
        return "" if text.strip(" .").upper() == prompts.CONDENSE_NONE else text

    # -- compress -----------------------------------------------------------------------------
    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        out_tokens = self._out_tokens(max_tokens)
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
        claims = tuple(_verified_claim(c.text, c.evidence, c.confidence, transcript.sources)
                       for c in out.claims)
        return Finding(subquestion_index=sq.index, subquestion=sq.question, claims=claims,
                       raw_notes=_notes(transcript))

    # -- report -------------------------------------------------------------------------------
    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        out_tokens = self._out_tokens(max_tokens)
        messages = [Message(role="system", content=prompts.REPORT_SYSTEM),
                    Message(role="user",
                            content=prompts.report_user(plan, render_findings(findings)))]
        out, _ = self._ask(messages, DraftOut, what="report", max_tokens=out_tokens)
        return _draft(plan, out)

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
        """Ask for JSON of `shape`; on a bad answer re-ask once with the error, then give up.

        Returns the parsed answer and the conversation including it (for a follow-up complaint).
        Without `reask`, a bad answer raises `_InvalidOutput` at once.
        """
        schema = json_schema(shape)
        tokens = self._out_tokens(max_tokens)
        for attempt in range(2 if reask else 1):
            completion = self._call(messages, max_tokens=tokens, schema=schema)
            answered = [*messages, Message(role="assistant", content=completion.text)]
            try:
                return _parse(completion.text, shape), answered
            except _InvalidOutput as exc:
                error = exc
            if attempt == 0 and reask:
                truncated = completion.finish_reason in ("length", "max_tokens")
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
        # The margin covers the gap between our estimate and the provider's tokenizer.
        budget = int(self.limits.request_budget(self.model.model) * (1 - SAFETY_MARGIN))
        return max(0, budget - out_tokens)

    def _out_tokens(self, max_tokens: int | None) -> int:
        """The caller's max_tokens, else the default, never above the model's known output cap."""
        tokens = max_tokens or self.max_output_tokens
        cap = self.limits.max_output(self.model.model)
        return min(tokens, cap) if cap else tokens

    def _chars(self, tokens: int, sample: str) -> int:
        ratio = self.estimator.chars_per_token(sample[:4000], model=self.model.model)
        return max(0, int(tokens * ratio))

    def _fit_text(self, text: str, frame: Sequence[Message], out_tokens: int) -> str:
        """`text` cut (head + tail, spilled to disk when asked) to fit beside `frame`."""
        room = self._input_budget(out_tokens) - self._tokens(frame)
        if self._tokens(text) <= room:
            return text
        return truncate_tool_result(text, self._chars(room, text), self.spill_dir)

    def _compact(self, messages: list[Message], budget: int) -> list[Message]:
        """The pre-emptive path (seed 003): cap tool results, then checkpoint older turns.

        Each step keeps the first message (the compression instruction) and never splits a tool
        call from its result. If even the smallest form is over budget it is sent anyway: the
        provider's ContextOverflow then reaches the caller, which shrinks harder.
        """
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
        return self._call(messages, max_tokens=self._out_tokens(None)).text


# -- parsing ------------------------------------------------------------------------------------
def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text


def _parse(text: str, shape: type[Out]) -> Out:
    """The first JSON object in `text` (fences and surrounding prose tolerated) as `shape`."""
    body = _strip_fence(text).strip()
    start = body.find("{")
    if start < 0:
        raise _InvalidOutput("no JSON object in the answer")
    try:
        data, _ = json.JSONDecoder().raw_decode(body[start:])
    except json.JSONDecodeError as exc:
        raise _InvalidOutput(f"invalid JSON: {exc.msg} at position {exc.pos}") from exc
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise _InvalidOutput(problems) from exc


def _plan_complaint(plan: PlanOut, low: int) -> str | None:
    if len(plan.subquestions) < low:
        return prompts.complaint_too_few_subquestions(low, len(plan.subquestions))
    if plan.intent != "compare":
        return None
    if len(plan.targets) < 2:
        return prompts.complaint_too_few_targets()
    # A dimension names all targets (or none, "How do they differ in cost?"); naming exactly
    # one is the per-option pattern the report cannot compare from.
    offenders = [sq.question for sq in plan.subquestions
                 if sum(t.lower() in sq.question.lower() for t in plan.targets) == 1]
    return prompts.complaint_one_target_each(plan.targets, offenders) if offenders else None


def _query_key(query: str) -> str:
    return " ".join(query.lower().split())


def _notes(transcript: Transcript) -> str:
    """The condensed page notes (tool results other than search listings), oldest first."""
    return "\n\n".join(m.content.strip() for m in transcript.messages
                       if m.role == "tool" and m.name != "search" and m.content.strip())


# -- quote verification ------------------------------------------------------------------------
def _normalised(text: str) -> tuple[str, list[int]]:
    """`text` with whitespace runs collapsed and typography folded, and each char's origin."""
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text.translate(_CHAR_FOLD)):
        if ch.isspace():
            if not chars or chars[-1] == " ":
                continue
            ch = " "
        chars.append(ch)
        origin.append(i)
    return "".join(chars), origin


def _anchor(quote: str, source_text: str) -> str | None:
    """The exact substring of `source_text` that `quote` matches up to whitespace, or None."""
    needle = " ".join(quote.translate(_CHAR_FOLD).split())
    if not needle:
        return None
    hay, origin = _normalised(source_text)
    at = hay.find(needle)
    if at < 0:
        return None
    return source_text[origin[at]:origin[at + len(needle) - 1] + 1]


def _url_key(url: str) -> str:
    url = url.strip().split("#")[0].rstrip("/").lower()
    return url.replace("http://", "https://", 1)


def _verify(ev: EvidenceOut, sources: Sequence[Source]) -> list[Evidence]:
    """The quote anchored in its page; else in any page read (the model mixed up URLs).

    A quote stitched with an ellipsis is checked fragment by fragment.
    """
    named = [s for s in sources if _url_key(s.url) == _url_key(ev.url)]
    others = [s for s in sources if s not in named]
    found: list[Evidence] = []
    for fragment in filter(None, (f.strip() for f in _ELLIPSIS.split(ev.quote))):
        for source in (*named, *others):
            exact = _anchor(fragment, source.text)
            if exact:
                found.append(Evidence(url=source.url, title=source.title, quote=exact))
                break
    return found


def _verified_claim(text: str, evidence: Sequence[EvidenceOut], confidence: str,
                    sources: Sequence[Source]) -> Claim:
    kept: dict[tuple[str, str], Evidence] = {}
    for ev in evidence:
        for found in _verify(ev, sources):
            kept.setdefault((found.url, found.quote), found)
    # "high" means several pages agree; without verified quotes the claim cannot keep it.
    if not kept and confidence == "high":
        confidence = "medium"
    return Claim(text=text.strip(), evidence=tuple(kept.values()), confidence=confidence)


# -- report draft ------------------------------------------------------------------------------
def _draft(plan: ResearchPlan, out: DraftOut) -> ReportDraft:
    indexes = [sq.index for sq in plan.subquestions]
    returned = [s.subquestion_index for s in out.sections]
    # The prompt numbers sub-questions from 1; a model that numbered from 0 (or ignored the
    # numbers but wrote one section per sub-question in order) is mapped back too.
    if all(r - 1 in indexes for r in returned):
        mapped = [r - 1 for r in returned]
    elif all(r in indexes for r in returned):
        mapped = returned
    elif len(returned) == len(indexes):
        mapped = indexes
    else:
        mapped = returned
    sections = [s.model_copy(update={"subquestion_index": i}) for s, i in zip(out.sections, mapped)]
    drafted: dict[int, SectionDraft] = {}
    for s in sections:
        if s.subquestion_index in indexes and s.subquestion_index not in drafted:
            drafted[s.subquestion_index] = SectionDraft(
                subquestion_index=s.subquestion_index, heading=s.heading.strip(),
                body=s.body.strip())
    table = (out.comparison_table or "").strip() if plan.intent == "compare" else ""
    return ReportDraft(title=out.title.strip(), summary=out.summary.strip(),
                       sections=tuple(drafted[i] for i in indexes if i in drafted),
                       comparison_table=_strip_fence(table).strip() or None)
