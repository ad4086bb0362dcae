"""The LLM engine's report writer (core/engine/model_driven/writer.py) over the queueable fake chat model.

What is checked is what the writer sends (one call or one per section, the outline of the
intent, the word target, each section's own findings under the catalogue's keys) and what it
makes of the markdown that comes back; then the draft assembled into the report's final order.
"""

from __future__ import annotations

import re
from typing import Sequence

import pytest

from core.models import ReportDraft
from core.engine.model_driven.llm_engine import LLMEngine
from core.engine.model_driven.writer import HEADROOM, MIN_SECTION_WORDS, report_tokens
from core.llm.base import Completion
from core.models import Claim, Evidence, Finding, ResearchPlan
from core.overflow.windows import ContextLimits, ModelLimits
from core.signals import Fatal
from core.overflow.tokens import TokenEstimator
from core.reports.report import assemble, evidence_catalog
from tests.core.test_llm_engine import QueueModel, engine_for, make_findings, make_plan


def sized(intent: str = "describe", words: int = 300, language: str = "en") -> ResearchPlan:
    return make_plan(intent).model_copy(update={"report_words": words, "language": language})


def tagged_report(plan: ResearchPlan, frame_headings: bool = True) -> str:
    """A well-behaved one-call answer for `plan`'s intent; with `frame_headings` False the
    parts around the sections carry their tag only (the report then uses default headings)."""
    def head(tag: str, words: str) -> str:
        return f"## [{tag}] {words}" if frame_headings else f"## [{tag}]"

    lines = ["# Foxes and hens", head("summary", "In short"), "Foxes weigh 12 kg [E1]."]
    if plan.intent == "compare":
        lines += [head("comparison", "Side by side"), "| Dimension | fox | hen |", "|---|---|---|",
                  "| weight | 12 kg [E1] | — |"]
    lines += ["## [S1] Weight", "A fox weighs 12 kg [E1]. Hens lay 300 eggs [E2].",
              "## [S2] Speed", "Foxes run fast [E3]."]
    if plan.intent == "recommend":
        lines += [head("recommendation", "What to pick"), "Pick the fox for speed [E3]."]
    lines += [head("conclusion", "All told"), "Foxes are heavy and fast [E1][E3]."]
    return "\n".join(lines)


def user_prompts(model: QueueModel) -> list[str]:
    return [s.messages[-1].content for s in model.sent]


def headings(markdown: str) -> list[str]:
    return re.findall(r"^## (.+)$", markdown, re.M)


# -- one call ---------------------------------------------------------------------------------

@pytest.mark.parametrize("intent, tags", [
    ("describe", ["summary", "S1", "S2", "conclusion"]),
    ("compare", ["summary", "comparison", "S1", "S2", "conclusion"]),
    ("recommend", ["summary", "S1", "S2", "recommendation", "conclusion"]),
])
def test_a_report_that_fits_the_cap_is_one_call_with_the_intents_outline(
        intent: str, tags: list[str]) -> None:
    plan = sized(intent, words=300)
    assert report_tokens(300, "en") <= 1_000
    model = QueueModel(tagged_report(plan))
    draft = engine_for(model).write_report(plan, make_findings(), max_tokens=1_000)

    assert len(model.sent) == 1
    sent = model.sent[0]
    assert sent.json_schema is None and sent.max_tokens == 1_000  # markdown, not JSON
    prompt = sent.messages[-1].content
    assert "about 300 words" in prompt
    assert re.findall(r"^## \[(\w+)\]", prompt, re.M) == tags  # exactly these, in this order
    assert [s.subquestion_index for s in draft.sections] == [0, 1]
    assert draft.summary and draft.conclusion
    assert (draft.comparison_table is not None) == (intent == "compare")
    assert (draft.recommendation is not None) == (intent == "recommend")


# -- section by section -----------------------------------------------------------------------

def test_a_long_report_is_written_section_by_section_then_framed() -> None:
    plan = sized(words=5_000)
    findings = make_findings()
    assert report_tokens(5_000, "en") > 1_000
    model = QueueModel("## [S1] Weight\n\nA fox weighs 12 kg [E1]. Hens lay 300 eggs [E2].",
                       "Foxes run fast [E3].",  # no heading: the sub-question is the heading
                       "# Foxes and hens\n\n## [summary] In short\n\nFoxes weigh 12 kg [E1].\n\n"
                       "## [conclusion] All told\n\nHeavy and fast [E1][E3].")
    draft = engine_for(model).write_report(plan, findings, max_tokens=1_000)

    assert len(model.sent) == len(plan.sections) + 1
    assert all(s.json_schema is None and s.max_tokens == 1_000 for s in model.sent)
    first, second, frame = user_prompts(model)
    # Each section sees only its own findings, keyed as in the catalogue of all findings.
    catalog = evidence_catalog(findings)
    for prompt, own in ((first, {"E1", "E2"}), (second, {"E3"})):
        assert set(re.findall(r"\[(E\d+)\]", prompt)) == own
        for key, ev in catalog:
            if key in own:
                line = next(l for l in prompt.splitlines() if f"[{key}]" in l)
                assert ev.quote in line
            else:
                assert ev.quote not in prompt
    assert "about 1250 words" in first and "[S1]" in first and "[S2]" not in first
    assert "[S2]" in second and "[S1]" not in second
    # The frame is written around the sections already written.
    assert "A fox weighs 12 kg [E1]." in frame and "Foxes run fast [E3]." in frame
    assert "## [summary]" in frame and "## [conclusion]" in frame

    assert draft.title == "Foxes and hens"
    assert [(s.subquestion_index, s.heading, s.body) for s in draft.sections] == [
        (0, "Weight", "A fox weighs 12 kg [E1]. Hens lay 300 eggs [E2]."),
        (1, "How fast?", "Foxes run fast [E3].")]
    assert draft.summary == "Foxes weigh 12 kg [E1]."
    assert (draft.conclusion, draft.heading("conclusion")) == ("Heavy and fast [E1][E3].",
                                                               "All told")


def test_a_one_call_report_cut_off_is_asked_again_briefly_at_the_same_cap() -> None:
    """A report that runs past its cap (sized by the word target, with headroom) is a model
    rambling: it is told to be shorter, at the same cap, without its cut text sent back."""
    plan = sized(words=300)
    model = QueueModel(Completion(text="# Foxes\n## [summary] In", model="fake-1",
                                  finish_reason="length"), tagged_report(plan))
    draft = engine_for(model, window=32_000).write_report(plan, make_findings(), max_tokens=1_000)

    assert len(model.sent) == 2
    assert model.sent[1].max_tokens == model.sent[0].max_tokens
    assert model.sent[1].messages[:-1] == model.sent[0].messages
    assert "cut off" in model.sent[1].messages[-1].content
    assert "about 300 words" in model.sent[1].messages[-1].content
    assert [s.heading for s in draft.sections] == ["Weight", "Speed"]


def test_a_report_cut_off_twice_is_an_invalid_output_for_the_fallback() -> None:
    from core.engine.model_driven.calls import INVALID_OUTPUT

    cut = Completion(text="# Foxes\n## [summary] Foxes foxes foxes", model="fake-1",
                     finish_reason="length")
    model = QueueModel(cut, cut, "never asked")
    with pytest.raises(Fatal) as raised:
        engine_for(model, window=32_000).write_report(sized(words=300), make_findings())
    assert raised.value.reason == INVALID_OUTPUT and "cut off" in str(raised.value)
    assert len(model.sent) == 2


# -- reading the markdown ---------------------------------------------------------------------

def test_untagged_headings_fill_the_sections_in_order_and_conclusion_is_recognised() -> None:
    model = QueueModel("# Foxes\n## Weight of foxes\nA fox weighs 12 kg [E1].\n"
                       "## Speed of foxes\nFoxes run fast [E3].\n"
                       "## Conclusion\nHeavy and fast [E1][E3].")
    draft = engine_for(model).write_report(sized(), make_findings())

    assert len(model.sent) == 1
    assert [(s.subquestion_index, s.heading) for s in draft.sections] == [
        (0, "Weight of foxes"), (1, "Speed of foxes")]
    assert draft.conclusion == "Heavy and fast [E1][E3]."
    assert draft.heading("conclusion") == "Conclusion"


def test_an_untagged_heading_naming_a_part_only_in_passing_is_a_section() -> None:
    model = QueueModel("# Foxes\n## Overview of fox weight\nA fox weighs 12 kg [E1].\n"
                       "## Speed\nFoxes run fast [E3].\n## Conclusion\nBoth [E1].")
    draft = engine_for(model).write_report(sized(), make_findings())
    assert [(s.subquestion_index, s.heading) for s in draft.sections] == [
        (0, "Overview of fox weight"), (1, "Speed")]
    assert draft.summary == "" and draft.conclusion == "Both [E1]."


def test_an_untagged_chinese_closing_heading_is_the_conclusion() -> None:
    model = QueueModel("# 狐狸\n## 摘要\n狐狸又重又快 [E1]。\n## 重量\n狐狸重12公斤 [E1]。\n"
                       "## 速度\n狐狸跑得快 [E3]。\n## 总结\n证据表明狐狸又重又快 [E1][E3]。")
    draft = engine_for(model).write_report(sized(language="zh"), make_findings())
    assert draft.summary == "狐狸又重又快 [E1]。"
    assert [s.heading for s in draft.sections] == ["重量", "速度"]
    assert draft.conclusion == "证据表明狐狸又重又快 [E1][E3]。"


def test_an_answer_without_any_section_heading_twice_is_fatal() -> None:
    model = QueueModel("Foxes are heavy [E1].", "# Foxes\nStill no sections [E3].")
    with pytest.raises(Fatal, match="follows the outline"):
        engine_for(model).write_report(sized(), make_findings())
    assert len(model.sent) == 2
    complaint = model.sent[1].messages[-1]
    assert complaint.role == "user" and "no '## ' sections found" in complaint.content
    assert model.sent[1].messages[-2].content == "Foxes are heavy [E1]."  # its own answer


# -- language ---------------------------------------------------------------------------------

def test_chinese_needs_more_tokens_per_word_and_the_writer_is_told_chinese() -> None:
    assert report_tokens(2_000, "zh") > report_tokens(2_000, "en")
    assert report_tokens(2_000, "zh-CN") == report_tokens(2_000, "zh")

    english = QueueModel(tagged_report(sized()))
    engine_for(english).write_report(sized(words=2_000), make_findings(), max_tokens=4_096)
    assert len(english.sent) == 1  # 2,000 English words fit 4,096 tokens in one call
    assert "English (en)" in english.sent[0].messages[0].content

    chinese = QueueModel("## [S1] 重量\n狐狸重12公斤 [E1]。", "## [S2] 速度\n狐狸跑得快 [E3]。",
                         "# 狐狸\n## [summary] 摘要\n狐狸又重又快 [E1]。\n## [conclusion] 结论\n完 [E3]。")
    draft = engine_for(chinese).write_report(sized(words=2_000, language="zh"), make_findings(),
                                             max_tokens=4_096)
    assert len(chinese.sent) == 3  # 2,000 Chinese words do not: section by section
    assert all("Chinese (zh)" in s.messages[0].content for s in chinese.sent)
    assert [s.heading for s in draft.sections] == ["重量", "速度"]
    assert draft.heading("summary") == "摘要" and draft.heading("conclusion") == "结论"


# -- assembled --------------------------------------------------------------------------------

def assembled(plan: ResearchPlan, findings: Sequence[Finding], draft: ReportDraft) -> str:
    return assemble(plan, findings, draft, report_id="r_1", engine="llm:fake:fake-1").markdown


@pytest.mark.parametrize("intent, order", [
    ("describe", ["Executive summary", "Weight", "Speed", "Conclusion", "References"]),
    ("compare", ["Executive summary", "Comparison", "Weight", "Speed", "Conclusion",
                 "References"]),
    ("recommend", ["Executive summary", "Weight", "Speed", "Recommendation", "Conclusion",
                   "References"]),
])
def test_the_assembled_report_follows_the_intents_order(intent: str, order: list[str]) -> None:
    plan, findings = sized(intent), make_findings()
    model = QueueModel(tagged_report(plan, frame_headings=False))
    markdown = assembled(plan, findings, engine_for(model).write_report(plan, findings))

    assert headings(markdown) == order
    assert "[E1]" not in markdown and "[1]" in markdown  # keys became reference numbers


def test_the_writers_own_headings_are_kept_in_the_assembled_report() -> None:
    plan, findings = sized("recommend"), make_findings()
    model = QueueModel(tagged_report(plan))
    markdown = assembled(plan, findings, engine_for(model).write_report(plan, findings))
    assert headings(markdown) == ["In short", "Weight", "Speed", "What to pick", "All told",
                                  "References"]


def test_markdown_in_a_quote_is_escaped_in_references_and_kept_raw_in_the_citation() -> None:
    quote = "Call __enter__() with *args before the block runs."
    findings = [Finding(subquestion_index=0, subquestion="How heavy?", claims=(
        Claim(text="Context managers call enter.", evidence=(
            Evidence(url="https://docs.example/with", title="The with statement",
                     quote=quote),)),))]
    plan = sized()
    model = QueueModel("# With\n## [summary]\nEnter is called first [E1].\n"
                       "## [S1] Entering\nIt calls `__enter__()` [E1].\n## [conclusion]\nSo [E1].")
    report = assemble(plan, findings, engine_for(model).write_report(plan, findings),
                      report_id="r_1", engine="llm:fake:fake-1")

    references = report.markdown.split("## References", 1)[1]
    assert r"Call \_\_enter\_\_() with \*args before the block runs." in references
    assert "__enter__()" not in references
    assert [c.quote for c in report.citations] == [quote]
