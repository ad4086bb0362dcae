"""The LLM engine's report writer: markdown prose citing evidence keys, sized by a word target.

A report of `plan.report_words` words is written in one call when its output fits the role's
output cap; otherwise it is written section by section: one call per section with that
section's findings, then one call for the title, executive summary, comparison or
recommendation, and conclusion around the sections. A one-call report cut off at its cap is
asked once more, briefly; a second cut is an invalid output (core.engine.fallback). Either way the answer is markdown split back into the plan's parts by the tags of
its headings (`core.engine.model_driven.answers.draft_from_markdown`); references are numbered later, in code.

Nothing here retries a provider fault or shrinks on overflow: a `ContextOverflow` reaches the
report shrink loop (core.overflow.recovery), which cuts findings and calls again.
"""

from __future__ import annotations

import logging
from typing import Sequence

from core.models import ReportDraft
from core.engine.model_driven import prompts
from core.engine.model_driven.answers import InvalidOutput, draft_from_markdown, split_markdown
from core.engine.model_driven.calls import ModelCalls, invalid_output
from core.text.language import is_cjk
from core.models import Finding, Message, ResearchPlan
from core.overflow.shrink import finding_blocks
from core.reports.report import cited_keys, evidence_catalog

log = logging.getLogger("researchflow.engine")

OUTLINE_TOKENS = 300  # headings, tags and citation keys around the prose
HEADROOM = 1.5  # output cap over the estimate for the target length
MIN_SECTION_WORDS = 150


def report_tokens(words: int, language: str) -> int:
    """Output tokens for `words` words of report prose in `language`, with room to spare.

    English runs about 1.4 tokens a word; in Chinese, Japanese and Korean a "word" of the
    target is a character or two, about 2 tokens.
    """
    per_word = 2.0 if is_cjk(language) else 1.4
    return int(words * per_word * 1.2) + OUTLINE_TOKENS


class ReportWriter:
    def __init__(self, engine: ModelCalls, plan: ResearchPlan) -> None:
        self.engine = engine
        self.plan = plan

    def write(self, findings: Sequence[Finding], cap: int) -> ReportDraft:
        """The report within `cap` output tokens per call."""
        needed = report_tokens(self.plan.report_words, self.plan.language)
        if needed > cap:
            log.info("report of ~%d words needs ~%d output tokens > %d per call: writing it "
                     "section by section", self.plan.report_words, needed, cap)
            return self.by_section(findings, cap)
        messages = [self._system(),
                    Message(role="user", content=prompts.report_user(
                        self.plan, "\n\n".join(finding_blocks(findings))))]
        # The target sizes the cap, with headroom: a model that overshoots a little is not cut.
        return self._ask(messages, min(cap, int(needed * HEADROOM)), what="report",
                         keys=_keys(findings))

    def by_section(self, findings: Sequence[Finding], cap: int) -> ReportDraft:
        plan = self.plan
        blocks = dict(zip((f.subquestion_index for f in findings), finding_blocks(findings)))
        words = max(MIN_SECTION_WORDS, plan.report_words // (len(plan.sections) + 2))
        written = []
        for sq in plan.sections:
            user = prompts.section_user(plan, sq.index, blocks.get(sq.index, ""), words)
            text = self._text([self._system(), Message(role="user", content=user)],
                              min(cap, int(report_tokens(words, plan.language) * HEADROOM)),
                              what=f"section {sq.index + 1} of the report")
            _, parts = split_markdown(text)
            heading, body = (parts[0][1], parts[0][2]) if parts else (sq.question, text.strip())
            written.append(f"## [S{sq.index + 1}] {heading or sq.question}\n\n{body}")
        sections = "\n\n".join(written)
        keys = _keys(findings)
        if keys and not cited_keys(sections) & keys:
            raise invalid_output(self.engine, "report that cites its evidence",
                                 "no section cited any of the evidence keys it was given")
        frame_words = max(MIN_SECTION_WORDS, 2 * words)
        user = prompts.frame_user(plan, sections, frame_words)
        frame = self._text([self._system(), Message(role="user", content=user)],
                           min(cap, int(report_tokens(frame_words, plan.language) * HEADROOM)),
                           what="summary and conclusion of the report")
        title, parts = split_markdown(frame)
        # The frame's parts around the sections, in the report's order.
        head = "\n\n".join(f"## {_tagged(p, h)}\n\n{b}" for p, h, b in parts)
        return draft_from_markdown(plan, f"# {title or plan.topic}\n\n{head}\n\n{sections}")

    # -- calls ----------------------------------------------------------------------------------
    def _system(self) -> Message:
        return self.engine.system(prompts.REPORT_SYSTEM, self.plan.language)

    def _text(self, messages: list[Message], tokens: int, *, what: str) -> str:
        """A part's prose within its cap (sized by its word target: a larger cap would only let
        a looping model loop longer); a part cut off there keeps what came."""
        completion = self.engine.complete(messages, max_tokens=tokens)
        if completion.truncated:
            log.warning("%s was cut at its output cap (%d tokens); keeping what came", what,
                        tokens)
        return completion.text

    def _ask(self, messages: list[Message], tokens: int, *, what: str,
             keys: set[str]) -> ReportDraft:
        """The whole report in one answer, asked once more when it does not follow the outline
        or runs past its cap (then told to be brief: a larger cap, or section by section, would
        only give a rambling model more room); a second bad answer is an invalid output, which
        the extractive engine may answer (core.engine.fallback)."""
        error: InvalidOutput | None = None
        asked = messages
        for attempt in range(2):
            completion = self.engine.complete(asked, max_tokens=tokens)
            if completion.truncated:
                error = InvalidOutput(f"cut off at its output cap of {tokens} tokens")
                asked = [*messages, Message(role="user", content=prompts.complaint_report_cut_off(
                    tokens, self.plan.report_words))]
                continue
            try:
                draft = draft_from_markdown(self.plan, completion.text)
                if keys and not cited_keys(completion.text) & keys:
                    # A report with evidence to cite that cites none is no report of it.
                    raise InvalidOutput("it cites none of the evidence keys ([E1], [E2], ...)")
                return draft
            except InvalidOutput as exc:
                error = exc
            asked = [*messages, Message(role="assistant", content=completion.text),
                     Message(role="user", content=prompts.complaint_report_outline(str(error)))]
        raise invalid_output(self.engine, f"{what} that follows the outline",
                             f"twice; last problem: {error}")


def _keys(findings: Sequence[Finding]) -> set[str]:
    return {key for key, _ in evidence_catalog(findings)}


def _tagged(part: str | None, heading: str) -> str:
    if part is None:
        return heading
    return f"[{part}] {heading}"
