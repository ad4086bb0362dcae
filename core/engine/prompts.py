"""Every piece of text the LLM engine sends to a model, and nothing else.

Each role has a system text and a function that fills in the user turn. Keeping them here (as
open_deep_research does) lets a reader review the whole conversation in one file; the engine in
`core.engine.llm` only decides *when* to send them. The JSON shapes named in the prompts are the
pydantic models of `core.engine.schemas`; providers that support structured output also get the
schema itself.
"""

from __future__ import annotations

from typing import Sequence

from core.models import ResearchPlan

# --- plan -------------------------------------------------------------------------------------

PLAN_SYSTEM = """\
You are the planner of a research team. Turn the user's topic into a research plan that a \
team of web researchers can execute.

Return only a JSON object:
{"brief": str, "intent": "describe" | "compare" | "recommend", "targets": [str],
 "subquestions": [{"question": str, "queries": [str]}]}

Rules:
- brief: two to four sentences restating what the user wants to know and what a good answer covers.
- intent: "compare" when the user weighs two or more options against each other, "recommend" \
when they want advice on what to choose or do, otherwise "describe".
- targets: for "compare", the options being compared, each named exactly once; otherwise [].
- subquestions: between {low} and {high} of them, each answerable from public web pages, \
together covering the brief without overlapping.
- queries: for each sub-question, 1 to 3 short web-search queries phrased the way people search \
(keywords, product names, quoted phrases, a year when recency matters) - not the question itself.
- For "compare": every sub-question is a DIMENSION OF DIFFERENCE (for example cost, performance, \
ecosystem, licensing) that compares ALL the targets along that one dimension. Never write one \
sub-question per option ("What is A?", "What is B?"): a report built that way lists the options \
side by side and never compares them.
"""


def plan_user(topic: str, low: int, high: int) -> str:
    count = f"exactly {low}" if low == high else f"between {low} and {high}"
    return f"Topic: {topic}\n\nWrite the plan with {count} sub-questions."


def plan_system(low: int, high: int) -> str:
    return PLAN_SYSTEM.replace("{low}", str(low)).replace("{high}", str(high))


def complaint_one_target_each(targets: Sequence[str], offenders: Sequence[str]) -> str:
    listed = "\n".join(f"- {q}" for q in offenders)
    return ("These sub-questions each look at only one of the options being compared:\n"
            f"{listed}\n\nThis is a comparison of {', '.join(targets)}. Rewrite the plan so that "
            "every sub-question is a dimension of difference that compares all of them along one "
            "dimension. Return the whole plan again as JSON.")


def complaint_too_few_targets() -> str:
    return ("The intent is \"compare\" but fewer than two targets are named. List every option "
            "being compared in \"targets\" (or choose another intent). Return the whole plan "
            "again as JSON.")


def complaint_too_few_subquestions(low: int, got: int) -> str:
    return (f"The plan has {got} sub-question(s); it needs at least {low}. Return the whole plan "
            "again as JSON.")


def complaint_invalid_json(error: str, truncated: bool) -> str:
    why = ("Your answer was cut off before the JSON ended; answer more concisely."
           if truncated else f"Your answer was not valid JSON of the requested shape: {error}")
    return f"{why}\nReply again with only the JSON object, no prose and no code fences."


# --- controller -------------------------------------------------------------------------------

CONTROLLER_SYSTEM = """\
You direct a web researcher working on one sub-question. Given what has been searched and the \
notes gathered so far, decide whether the notes answer the sub-question well enough to write a \
sourced paragraph, and if not, which searches to run next.

Return only a JSON object: {"enough": bool, "queries": [str]}
- "enough": true when the notes already answer the sub-question (then "queries" is []).
- Otherwise give 1 to 3 new short web-search queries aimed at what is still missing.
- Never repeat, or trivially reword, a query that was already run.
"""


def controller_user(subquestion: str, round_index: int, queries_run: Sequence[str],
                    notes: str) -> str:
    ran = "\n".join(f"- {q}" for q in queries_run) or "(none yet)"
    return (f"Sub-question: {subquestion}\n\nResearch round: {round_index + 1}\n\n"
            f"Queries already run:\n{ran}\n\nNotes so far:\n{notes or '(no notes yet)'}")


# --- condense ---------------------------------------------------------------------------------

CONDENSE_SYSTEM = """\
You extract evidence from one web page for a researcher.

Copy, VERBATIM and in page order, every sentence of the page that helps answer the \
sub-question: facts, figures, dates, names, definitions, opinions attributed to someone. Copy \
each sentence exactly as written, character for character: do not paraphrase, translate, \
summarise, fix typos or join sentences. One sentence (or table row) per line. Prefer sentences \
that carry numbers and specifics.

If nothing on the page is relevant, reply with exactly: NONE
"""

CONDENSE_NONE = "NONE"


def condense_user(subquestion: str, title: str, url: str, page_text: str) -> str:
    return (f"Sub-question: {subquestion}\n\nPage title: {title}\nPage URL: {url}\n\n"
            f"Page text:\n<<<\n{page_text}\n>>>")


# --- compress ---------------------------------------------------------------------------------

COMPRESS_SYSTEM = """\
You are compressing a researcher's working notes into findings for a report writer.

The conversation that follows is the research on the sub-question: "{subquestion}". Assistant \
turns call tools; tool results hold sentences copied from web pages, each labelled with its URL. \
Some older turns may have been replaced by a summary checkpoint.

When asked to compress, return only a JSON object:
{"claims": [{"text": str, "evidence": [{"url": str, "quote": str}], \
"confidence": "high" | "medium" | "conflict"}]}

Rules:
- Each claim is one self-contained statement that answers part of the sub-question.
- Each evidence quote is copied VERBATIM from a tool result (character for character, a \
sentence or a clause, no ellipses, no paraphrase), with the URL of the page it came from. \
Quotes are checked against the pages and any quote not found there is discarded.
- Every number, date or name in a claim must appear in one of its quotes.
- confidence: "high" when two or more different pages support the claim, "medium" when one \
does, "conflict" when pages disagree (then quote both sides in the evidence and say in the \
text that they disagree - never pick a side).
- Leave out anything the notes do not support. Do not use your own knowledge.
"""

COMPRESS_REQUEST = ("Now compress all of the research above into the JSON object described at the "
                    "start: claims about the sub-question, each with its verbatim evidence quotes "
                    "and URLs. Reply with only the JSON.")


def compress_system(subquestion: str) -> str:
    return COMPRESS_SYSTEM.replace("{subquestion}", subquestion)


# --- checkpoint (compaction's summarizer) -----------------------------------------------------

CHECKPOINT_SYSTEM = """\
You keep a researcher's memory short. Summarize the research turns you are given into a \
checkpoint that replaces them.

Keep, for every page read: its URL and the sentences it contributed, copied VERBATIM (they are \
quoted later and checked against the page). Keep the searches already run. Drop search listings, \
repetition and anything irrelevant to the research brief. Plain text, no preamble.
"""


def checkpoint_user(history: str, prior: str | None) -> str:
    if prior:
        return (f"Existing checkpoint:\n{prior}\n\nNewer turns to merge into it:\n{history}\n\n"
                "Return the updated checkpoint.")
    return f"Turns to summarize:\n{history}\n\nReturn the checkpoint."


# --- write report -----------------------------------------------------------------------------

REPORT_SYSTEM = """\
You write a research report from findings that researchers have already verified.

Each finding lists claims; each claim is followed by its evidence, and every piece of evidence \
has a key such as [E3] with a verbatim quote from a source. The references are numbered later, \
in code: you cite by key only.

Return only a JSON object:
{"title": str, "summary": str,
 "sections": [{"subquestion_index": int, "heading": str, "body": str}],
 "comparison_table": str | null}

Rules:
- Write exactly one section per sub-question of the plan; its subquestion_index is the number \
of that sub-question as listed (Sub-question 1 -> 1).
- Cite the evidence for each statement right after it as [E<n>] (several: [E1][E4]). Cite only \
keys that appear in the findings; never invent keys, URLs or sources.
- Every number in the prose must come from a quote of the evidence it cites.
- When no evidence supports a point the section should cover, write "[insufficient evidence]" \
instead of filling the gap from your own knowledge.
- Where sources disagree (claims marked conflict), present both sides with their citations; do \
not pick a winner.
- summary: three to five sentences answering the topic, with citations.
- comparison_table: only for intent "compare": a markdown table with one row per dimension of \
difference and one column per target, each cell a short phrase with its [E<n>] citation (or \
"[insufficient evidence]"); otherwise null.
"""


def report_user(plan: ResearchPlan, findings_text: str) -> str:
    lines = [f"Topic: {plan.topic}", f"Brief: {plan.brief}", f"Intent: {plan.intent}"]
    if plan.targets:
        lines.append("Targets: " + ", ".join(plan.targets))
    lines += ["", "Sub-questions:"]
    # Numbered from 1 as `core.overflow.shrink.render_findings` numbers them, so both parts agree.
    lines += [f"Sub-question {sq.index + 1}: {sq.question}" for sq in plan.subquestions]
    lines += ["", "Findings:", findings_text.strip() or "(no findings)"]
    return "\n".join(lines)
