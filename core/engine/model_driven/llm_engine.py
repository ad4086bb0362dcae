"""The research engine backed by any `core.llm` chat model.

Roles: plan; choose which search results to read (from titles and snippets); reflect and pick
follow-up searches; rewrite searches that found nothing readable; condense a page; compress a
transcript into findings; review a wave of findings as the supervisor; write the report
(`core.engine.model_driven.writer`, markdown). Each is one call (the report may be several) sized to the
model's window by `core.engine.model_driven.calls`, with prompt text in `core.engine.model_driven.prompts` and JSON
answers validated by `core.engine.model_driven.schemas`. What the engine guarantees on top of the model:

- a malformed answer is re-asked once with the parse error, then raises `Fatal`: a plan, finding
  or report is never invented silently, and an error is never returned as content;
- a compare plan whose sub-questions each cover one option is re-asked once (ARCHITECTURE.md, "Evidence");
- condensing sends the page as numbered sentences and takes the model's ids: the notes are the
  page's own sentences, copied in code, so no output token is spent retyping them;
- every quote in a finding is checked against the page it came from and stored as the exact
  substring of that page's text; unverifiable quotes are dropped, titles come from the sources;
  a finding none of whose claims can be quoted is an invalid answer (the fallback's to answer);
- before compressing, the request is estimated and compacted when over budget; a
  `ContextOverflow` from the provider still propagates, for the caller to shrink and retry.

It never numbers citations (`core.reports.report` does) and never sleeps or retries on provider
errors.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Sequence

from core.engine.model_driven import prompts
from core.engine.model_driven.answers import (InvalidOutput, distinct_subquestions,
                                              plan_complaint)
from core.models import ReportDraft
from core.engine.model_driven.calls import invalid_output
from core.engine.model_driven.quotes import verified_claim
from core.engine.model_driven.revising import RevisingCalls, claims_answer, note_lines
from core.engine.model_driven.revisions import line_hash
from core.engine.model_driven.schemas import (ChooseOut, CompressOut, CondenseOut, ControllerOut, PlanOut,
                                 ReviewOut, RewriteOut, json_schema, plan_schema)
from core.engine.sentences import units
from core.engine.model_driven.writer import ReportWriter
from core.text.language import resolve_language
from core.accounting.ledger import acting_as
from core.models import (FollowUp, Finding, Message, ResearchPlan, SearchResult, Source,
                         SubQuestion, Topic, Transcript)
from core.overflow.compaction import (MIN_SUMMARY_BUDGET_TOKENS, CompactionFailed,
                                      compact_transcript, render_for_summary,
                                      truncate_tool_results)
from core.overflow.shrink import fit_tool_results

MAX_SUBQUESTIONS = 6
MAX_NEXT_QUERIES = 3
MAX_IDS = 20  # sentences kept per page (per piece of a page too big for one call)
MAX_SEEN = 12  # results of failed searches shown to the rewrite role
SNIPPET_CHARS = 300

log = logging.getLogger("researchflow.engine")


class LLMEngine(RevisingCalls):
    """`ResearchEngine` over a `ChatModel`. Safe to share between worker threads."""

    def for_role(self, role: str) -> "LLMEngine":
        return self

    def notice_for(self, language: str | None) -> str | None:
        return None  # a model writes its report: nothing to say under the title

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan:
        high = min(topic.max_subquestions, MAX_SUBQUESTIONS)
        low = min(3, high)
        language = resolve_language(topic.language, topic.text)
        messages = [self._system(prompts.plan_system(low, high), language),
                    Message(role="user", content=prompts.plan_user(topic.text, low, high))]
        tokens = self._out_tokens(max_tokens, "plan", language)
        schema = plan_schema(low, high)
        out, convo = self._ask(messages, PlanOut, what="research plan", max_tokens=tokens,
                               schema=schema)
        out = distinct_subquestions(out)
        complaint = plan_complaint(out, low)
        if complaint:
            try:  # one re-ask with the complaint; a valid plan that answers it is accepted
                again, _ = self._ask([*convo, Message(role="user", content=complaint)], PlanOut,
                                     what="research plan", reask=False, max_tokens=tokens,
                                     schema=schema)
                again = distinct_subquestions(again)
                if len(again.subquestions) >= len(out.subquestions):
                    out = again
            except InvalidOutput:
                pass  # the first plan was valid JSON: keep it if it has enough questions
        if len(out.subquestions) < low:  # e.g. the same question three times, twice
            raise invalid_output(self, "research plan",
                                 f"{len(out.subquestions)} distinct sub-question(s) where "
                                 f"{low} were asked for, twice")
        subqs = tuple(SubQuestion(index=i, question=sq.question.strip(),
                                  queries=tuple(sq.queries) or (sq.question.strip(),),
                                  language=language)
                      for i, sq in enumerate(out.subquestions[:high]))
        targets = tuple(out.targets) if out.intent == "compare" else ()
        return ResearchPlan(topic=topic.text.strip(), brief=out.brief.strip(), intent=out.intent,
                            targets=targets, subquestions=subqs, language=language,
                            report_words=topic.report_words)

    # -- research rounds ----------------------------------------------------------------------
    def next_queries(self, transcript: Transcript, round_index: int, *,
                     max_tokens: int | None = None, scale: float = 1.0) -> list[str]:
        """`scale` (< 1 after an overflow without numbers) shrinks the room for the notes."""
        sq = transcript.subquestion
        system = self._system(prompts.CONTROLLER_SYSTEM, sq.language)
        frame = prompts.controller_user(sq.question, round_index, transcript.queries_run, "")
        tokens = self._out_tokens(max_tokens, "queries", sq.language)
        schema = self._tokens(json.dumps(json_schema(ControllerOut)))
        whole = _notes(transcript)
        notes = self._fit_text(whole, [system, Message(role="user", content=frame)],
                               tokens, reserve=schema, scale=scale)
        lines = [n.text for n in note_lines(transcript)]
        lineage = self._lineage("queries", sq.question, sq.language, round=round_index,
                                ran=list(transcript.queries_run))
        out = self._revised_decision(lineage, transcript, round_index, lines, tokens) \
            if notes == whole else None  # notes cut to fit: asked in full
        if out is None:
            user = prompts.controller_user(sq.question, round_index, transcript.queries_run,
                                           notes)
            out, _ = self._ask([system, Message(role="user", content=user)], ControllerOut,
                               what="decision on further searches", max_tokens=tokens)
            self._keep(lineage, lines, out.model_dump())
        if out.reflection:
            log.info("sub-question %d, round %d: %s", sq.index, round_index + 1, out.reflection)
        if out.enough:
            return []
        seen = {_query_key(q) for q in transcript.queries_run}
        fresh: list[str] = []
        for q in out.queries:
            if _query_key(q) not in seen:
                seen.add(_query_key(q))
                fresh.append(q)
        return fresh[:MAX_NEXT_QUERIES]

    def choose_pages(self, transcript: Transcript, candidates: Sequence[SearchResult],
                     limit: int, *, max_tokens: int | None = None) -> list[int]:
        """Positions in `candidates` to read, judged from titles and snippets."""
        if not candidates or limit <= 0:
            return []
        sq = transcript.subquestion
        system = self._system(prompts.choose_system(limit), sq.language)
        listing = _listing(candidates)
        tokens = self._out_tokens(max_tokens, "choose", sq.language)
        frame = [system, Message(role="user", content=prompts.choose_user(sq.question, listing,
                                                                          ""))]
        notes = self._fit_text(_notes(transcript), frame, tokens,
                               reserve=self._tokens(json.dumps(json_schema(ChooseOut))), scale=0.5)
        user = Message(role="user", content=prompts.choose_user(sq.question, listing, notes))
        lineage = self._lineage("choose", sq.question, sq.language, limit=limit,
                                urls=[h.url for h in candidates])
        out = self._ask_unless_carried(lineage, [system, user], ChooseOut,
                                       what="choice of pages to read", tokens=tokens)
        picked = [n - 1 for n in out.read if 1 <= n <= len(candidates)]
        if out.why:
            log.info("sub-question %d reads %s: %s", sq.index, [n + 1 for n in picked], out.why)
        return picked[:limit]

    def rewrite_queries(self, subquestion: SubQuestion, failed: Sequence[str],
                        seen: Sequence[SearchResult], *,
                        max_tokens: int | None = None) -> list[str]:
        """Up to three more specific searches for a sub-question whose searches `failed` (found
        nothing readable); `seen` are the results they did return. Searches already run (the
        failed ones and the plan's) are dropped, compared case- and space-insensitively."""
        system = self._system(prompts.REWRITE_SYSTEM, subquestion.language)
        tokens = self._out_tokens(max_tokens, "rewrite", subquestion.language)
        frame = prompts.rewrite_user(subquestion.question, failed, "")
        listing = self._fit_text(_listing(seen[:MAX_SEEN], SNIPPET_CHARS),
                                 [system, Message(role="user", content=frame)], tokens,
                                 reserve=self._tokens(json.dumps(json_schema(RewriteOut))))
        user = Message(role="user",
                       content=prompts.rewrite_user(subquestion.question, failed, listing))
        out, _ = self._ask([system, user], RewriteOut, what="rewritten searches",
                           max_tokens=tokens)
        seen_keys = {_query_key(q) for q in (*failed, *subquestion.queries)}
        fresh: list[str] = []
        for q in out.queries:
            if _query_key(q) not in seen_keys:
                seen_keys.add(_query_key(q))
                fresh.append(" ".join(q.split()))
        return fresh[:MAX_NEXT_QUERIES]

    def condense(self, subquestion: SubQuestion, source: Source, *,
                 max_tokens: int | None = None) -> str:
        """The page's sentences that matter, chosen by number and copied here, in code, so
        every line of the notes is the page's own text (or one chunk of a page:
        `core.overflow.roles` chunks a page bigger than the window before it gets here; the
        cut below is the last safety net)."""
        system = self._system(prompts.CONDENSE_SYSTEM, subquestion.language)
        tokens = self._out_tokens(max_tokens, "condense", subquestion.language)
        frame = prompts.condense_user(subquestion.question, source.title, source.url, "")
        pieces = units(source.text)
        numbered = self._fit_text(_numbered(pieces), [system, Message(role="user", content=frame)],
                                  tokens, reserve=self._tokens(json.dumps(json_schema(CondenseOut))))
        shown = sorted({int(n) for n in re.findall(r"^\[(\d+)\] ", numbered, re.M)
                        if 1 <= int(n) <= len(pieces)})
        lines = [pieces[n - 1].clean for n in shown]
        lineage = self._lineage("condense", subquestion.question, subquestion.language,
                                url=source.url)
        revised = self._revised_ids(lineage, subquestion, source, shown, lines, tokens)
        if revised is not None:
            ids, note = revised
        else:
            messages = [system, Message(role="user", content=prompts.condense_user(
                subquestion.question, source.title, source.url, numbered))]
            out, _ = self._ask(messages, CondenseOut, what=f"notes on {source.url}",
                               max_tokens=tokens)
            offered = set(shown)
            ids, note = [n for n in dict.fromkeys(out.ids) if n in offered], out.note.strip()
            self._keep(lineage, lines, {"chosen": [line_hash(pieces[n - 1].clean)
                                                   for n in ids], "note": note})
        # The page's own text: `units` spans hold no line break, so each is one line of notes.
        picked = [pieces[n - 1].text for n in ids]
        if not picked:
            return ""
        note = f"({note})\n" if note else ""
        return note + "\n".join(picked[:MAX_IDS])

    def condense_room(self, subquestion: SubQuestion, source: Source, *,
                      max_tokens: int | None = None) -> int:
        """Tokens of page text one condense call can take at the current limits."""
        system = self._system(prompts.CONDENSE_SYSTEM, subquestion.language)
        frame = prompts.condense_user(subquestion.question, source.title, source.url, "")
        tokens = self._out_tokens(max_tokens, "condense", subquestion.language)
        schema = self._tokens(json.dumps(json_schema(CondenseOut)))
        # Numbering adds a few characters per sentence: keep a tenth of the room for it.
        return max(0, int(0.9 * (self._input_budget(tokens) - schema
                                 - self._tokens([system, Message(role="user", content=frame)]))))

    # -- compress -----------------------------------------------------------------------------
    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        sq = transcript.subquestion
        out_tokens = self._out_tokens(max_tokens, "compress", sq.language)
        # The instruction goes first: compaction keeps the first message intact.
        head = [self._system(prompts.compress_system(sq.question), sq.language),
                *transcript.messages]
        request = Message(role="user", content=prompts.COMPRESS_REQUEST)
        schema = json_schema(CompressOut)
        budget = (self._input_budget(out_tokens) - self._tokens(request)
                  - self._tokens(json.dumps(schema)))
        notes = note_lines(transcript)
        lineage = self._lineage("compress", sq.question, sq.language)
        revised = None
        if self._tokens(head) > budget:
            head = self._compact(head, budget, sq.language)
        else:  # a compacted transcript is compressed in full
            revised = self._revised_claims(lineage, transcript, notes, out_tokens)
        if revised is not None:
            claims = tuple(dict.fromkeys(revised))
        else:
            out, _ = self._ask([*head, request], CompressOut, what="finding",
                               max_tokens=out_tokens)
            # A weak model may repeat one claim: each is kept once.
            claims = tuple(dict.fromkeys(
                verified_claim(c.text, c.evidence, c.confidence, transcript.sources)
                for c in out.claims))
            if claims and _notes(transcript) and not any(c.evidence for c in claims):
                # Valid JSON, but nothing in it can be cited: a weak model's paraphrases. The
                # extractive engine quotes the same notes verbatim (core.engine.fallback).
                raise invalid_output(self, "finding", f"{len(claims)} claim(s), none quoting "
                                     "its sources verbatim")
            self._keep(lineage, [n.text for n in notes], claims_answer(claims))
        return Finding(subquestion_index=sq.index, subquestion=sq.question, claims=claims,
                       raw_notes=_notes(transcript))

    # -- supervisor ---------------------------------------------------------------------------
    def review(self, plan: ResearchPlan, findings: Sequence[Finding], gaps: Sequence[str],
               wave: int, limit: int, *, max_tokens: int | None = None,
               scale: float = 1.0) -> list[FollowUp]:
        if limit <= 0:
            return []
        system = self._system(prompts.review_system(limit), plan.language)
        tokens = self._out_tokens(max_tokens, "review", plan.language)
        frame = Message(role="user", content=prompts.review_user(plan, "", gaps, wave))
        digest = self._fit_text(render_digest(plan, findings), [system, frame], tokens,
                                reserve=self._tokens(json.dumps(json_schema(ReviewOut))),
                                scale=scale)
        user = Message(role="user", content=prompts.review_user(plan, digest, gaps, wave))
        lineage = self._lineage("review", "\n".join([plan.topic, *(
            sq.question for sq in plan.subquestions)]), plan.language, wave=wave, limit=limit)
        out = self._ask_unless_carried(lineage, [system, user], ReviewOut,
                                       what="review of the findings", tokens=tokens)
        if out.done and not out.followups:
            return []
        asked = {_query_key(sq.question) for sq in plan.subquestions}
        followups = []
        for f in out.followups:
            if _query_key(f.question) in asked:
                continue  # a rewording the model was told not to send is still not researched
            asked.add(_query_key(f.question))
            parent = f.fills - 1 if f.fills is not None else None
            followups.append(FollowUp(question=f.question.strip(), queries=tuple(f.queries),
                                      why=f.why.strip(), parent=parent))
        return followups[:limit]

    # -- report -------------------------------------------------------------------------------
    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        try:
            return ReportWriter(self, plan).write(findings, self._out_tokens(max_tokens,
                                                                             "report"))
        except InvalidOutput as exc:  # the sections' answers did not make a report
            raise invalid_output(self, "report", str(exc)) from exc

    def report_frame_tokens(self, plan: ResearchPlan) -> int:
        """Estimated tokens of the report request around the findings: prompts and plan.

        The shrink loop budgets the findings against what is left of the window after this.
        """
        return self._tokens([self._system(prompts.REPORT_SYSTEM, plan.language),
                             Message(role="user", content=prompts.report_user(plan, ""))])

    def _compact(self, messages: list[Message], budget: int,
                 language: str = "en") -> list[Message]:
        """The pre-emptive path (ARCHITECTURE.md, "Compaction before a call"): cap tool results, then checkpoint older turns.

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
                                          summarize=lambda batch, prior: self._summarize(
                                              batch, prior, language),
                                          budget_tokens=max(MIN_SUMMARY_BUDGET_TOKENS, budget // 2),
                                          estimator=self.estimator, model=self.model.model)
            except CompactionFailed:
                break
            if self._tokens(best) <= budget:
                break
        return best

    def _summarize(self, batch: list[Message], prior: str | None, language: str) -> str:
        """Compaction's summarizer: the engine's own model writes the checkpoint."""
        with acting_as("checkpoint"):
            return self._summarize_turns(batch, prior, language)

    def _summarize_turns(self, batch: list[Message], prior: str | None, language: str) -> str:
        messages = [self._system(prompts.CHECKPOINT_SYSTEM, language),
                    Message(role="user",
                            content=prompts.checkpoint_user(render_for_summary(batch), prior))]
        return self._call(messages,
                          max_tokens=self._out_tokens(None, "checkpoint", language)).text


def _listing(results: Sequence[SearchResult], snippet_chars: int | None = None) -> str:
    """Search results numbered from 1, each with its title, URL and snippet."""
    return "\n".join(f"{i}. {h.title} <{h.url}>\n   {h.snippet[:snippet_chars]}"
                     for i, h in enumerate(results, start=1))


def _numbered(pieces: Sequence[Any]) -> str:
    return "\n".join(f"[{i}] {p.clean}" for i, p in enumerate(pieces, start=1))


def render_digest(plan: ResearchPlan, findings: Sequence[Finding]) -> str:
    """What the supervisor reviews: each sub-question with its claims, their confidence and
    how many quotes back them (the quotes themselves are not needed to judge coverage)."""
    by_index = {f.subquestion_index: f for f in findings}
    parts = []
    for sq in plan.subquestions:
        tag = f" (follow-up to {sq.parent + 1})" if sq.parent is not None else ""
        lines = [f"Sub-question {sq.index + 1}{tag}: {sq.question}"]
        finding = by_index.get(sq.index)
        claims = finding.claims if finding else ()
        lines += [f"- ({c.confidence}, {len(c.evidence)} quote(s)) {c.text}" for c in claims]
        parts.append("\n".join(lines if claims else [*lines, "- (no findings)"]))
    return "\n\n".join(parts)


def _query_key(query: str) -> str:
    return " ".join(query.lower().split())


def _notes(transcript: Transcript) -> str:
    """The condensed page notes (tool results other than search listings), oldest first."""
    return "\n\n".join(m.content.strip() for m in transcript.messages
                       if m.role == "tool" and m.name != "search" and m.content.strip())
