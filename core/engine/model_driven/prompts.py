"""Every piece of text the LLM engine sends to a model, and nothing else.

Each role has a system text and a function that fills in the user turn. Keeping them here (as
open_deep_research does) lets a reader review the whole conversation in one file; the engine in
`core.engine.model_driven.llm_engine` only decides *when* to send them. The JSON shapes named in the prompts are the
pydantic models of `core.engine.model_driven.schemas`; providers that support structured output also get the
schema itself.
"""

from __future__ import annotations

from typing import Sequence

from core.text.language import language_name
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
    return (f"The plan has {got} distinct sub-question(s); it needs at least {low}, each asking "
            "something different. Return the whole plan again as JSON.")


def complaint_cut_off(tokens: int) -> str:
    return (f"Your answer ran past {tokens} tokens and was cut off before the JSON ended. Answer "
            "again, much more briefly: short strings, no repetition, only the fields asked for. "
            "Reply with only the JSON object, no prose and no code fences.")


def complaint_report_cut_off(tokens: int, words: int) -> str:
    return (f"Your report ran past {tokens} tokens and was cut off. Write it again, much "
            f"shorter: about {words} words in all, each heading once, no repetition, citing "
            "the evidence keys as before.")


def complaint_invalid_json(error: str, truncated: bool) -> str:
    why = ("Your answer was cut off before the JSON ended; answer more concisely."
           if truncated else f"Your answer was not valid JSON of the requested shape: {error}")
    return f"{why}\nReply again with only the JSON object, no prose and no code fences."


# --- researcher: choose what to read, reflect, search again ----------------------------------

CHOOSE_SYSTEM = """\
You direct a web researcher working on one sub-question. A search returned the results below, \
each numbered, with its title, URL and snippet. Choose which pages to read: those most likely to \
answer what is still missing, preferring primary, specific and recent sources. Skip duplicates, \
aggregators, and pages whose title and snippet show they are off-topic.

Return only a JSON object: {"read": [int], "why": str}
- "read": at most {limit} result numbers, best first; [] when none is worth reading.
- "why": one sentence on what you expect these pages to add.
"""


def choose_system(limit: int) -> str:
    return CHOOSE_SYSTEM.replace("{limit}", str(limit))


def choose_user(subquestion: str, listing: str, notes: str) -> str:
    return (f"Sub-question: {subquestion}\n\nWhat the pages read so far say:\n"
            f"{notes or '(nothing read yet)'}\n\nSearch results:\n{listing}")


CONTROLLER_SYSTEM = """\
You direct a web researcher working on one sub-question. Given what has been searched and the \
notes gathered so far, reflect on what the notes establish and what is still missing, then \
decide whether they answer the sub-question well enough to write a sourced paragraph, and if \
not, which searches to run next.

Return only a JSON object: {"reflection": str, "enough": bool, "queries": [str]}
- "reflection": two or three sentences: what is established, what is missing or disputed.
- "enough": true when the notes already answer the sub-question (then "queries" is []).
- Otherwise give 1 to 3 new short web-search queries aimed at what is still missing.
- Never repeat, or trivially reword, a query that was already run.
"""


def controller_user(subquestion: str, round_index: int, queries_run: Sequence[str],
                    notes: str) -> str:
    ran = "\n".join(f"- {q}" for q in queries_run) or "(none yet)"
    return (f"Sub-question: {subquestion}\n\nResearch round: {round_index + 1}\n\n"
            f"Queries already run:\n{ran}\n\nNotes so far:\n{notes or '(no notes yet)'}")


CONTROLLER_REVISE_SYSTEM = """\
You direct a web researcher working on one sub-question, and decided before what to do after \
this round. The notes have changed since: the lines shown entered them, and others left. Decide \
again whether the notes answer the sub-question well enough to write a sourced paragraph, and \
if not, which searches to run next. Keep your earlier decision unless the change matters.

Return only a JSON object: {"reflection": str, "enough": bool, "queries": [str]}
- "reflection": one or two sentences on what the change means.
- "queries": [] when enough; else 1 to 3 new short web-search queries, none already run.
"""


def controller_revise_user(subquestion: str, round_index: int, queries_run: Sequence[str],
                           earlier: str, entered: Sequence[str], left: int) -> str:
    ran = "\n".join(f"- {q}" for q in queries_run) or "(none yet)"
    lines = "\n".join(entered) or "(none)"
    return (f"Sub-question: {subquestion}\n\nResearch round: {round_index + 1}\n\n"
            f"Queries already run:\n{ran}\n\nYour earlier decision: {earlier}\n\n"
            f"Lines that entered the notes:\n{lines}\n\nLines that left the notes: {left}")


REWRITE_SYSTEM = """\
You rescue a web researcher's searches. The searches below found nothing readable for the \
sub-question: they returned no results, or only results that could not be read or were not \
worth reading. Their titles and snippets, when there were any, show what they found instead.

Propose up to 3 more specific web-search queries that are likely to find readable pages \
answering the sub-question: exact names, quoted phrases, site-specific terms (the project's \
documentation, a standards body, a known forum), other wording or synonyms, or the other \
language (English, or the language of the sub-question).

Return only a JSON object: {"queries": [str]}
- 1 to 3 short queries, each unlike the searches that failed (not a trivial rewording of one).
- Steer away from what made them fail: off-topic hits, paywalls, listings, a too broad wording.
"""


def rewrite_user(subquestion: str, failed: Sequence[str], listing: str) -> str:
    tried = "\n".join(f"- {q}" for q in failed) or "(none)"
    return (f"Sub-question: {subquestion}\n\nSearches that found nothing readable:\n{tried}\n\n"
            f"What they returned:\n{listing or '(no results at all)'}")


# --- condense ---------------------------------------------------------------------------------

CONDENSE_SYSTEM = """\
You pick the evidence on one web page for a researcher.

The page comes as numbered sentences: [1] ..., [2] ... Choose every sentence that helps answer \
the sub-question: facts, figures, dates, names, definitions, opinions attributed to someone. \
Prefer sentences that carry numbers and specifics. Do not copy the sentences: answer with their \
numbers, and the sentences are taken from the page exactly as written.

Return only a JSON object: {"ids": [int], "note": str}
- "ids": the numbers of the useful sentences, in page order, at most 20; [] when nothing on \
the page is relevant.
- "note": one short sentence on what the page contributes ("" when nothing).
"""


def condense_user(subquestion: str, title: str, url: str, numbered_text: str) -> str:
    return (f"Sub-question: {subquestion}\n\nPage title: {title}\nPage URL: {url}\n\n"
            f"Page sentences:\n<<<\n{numbered_text}\n>>>")


CONDENSE_REVISE_SYSTEM = """\
You pick the evidence on one web page for a researcher, and you did before: the page has \
changed since. Only its new and edited sentences are shown, numbered as on the page; your \
earlier choice among the others stands. Choose those that help answer the sub-question: facts, \
figures, dates, names, definitions. An edited sentence keeps its earlier verdict unless the edit \
changes what it is about.

Return only a JSON object: {"ids": [int]}: the numbers of the useful sentences shown, [] for none.
"""


def condense_revise_user(subquestion: str, title: str, chosen: Sequence[int],
                         passed: Sequence[int], numbered_text: str) -> str:
    def listed(ids: Sequence[int]) -> str:
        return ", ".join(map(str, ids)) or "none"

    return (f"Sub-question: {subquestion}\n\nPage title: {title}\n\n"
            f"Edited sentences whose earlier version you chose: {listed(chosen)}\n"
            f"Edited sentences whose earlier version you did not choose: {listed(passed)}\n\n"
            f"Page sentences:\n<<<\n{numbered_text}\n>>>")


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


COMPRESS_REVISE_SYSTEM = """\
You are updating a researcher's findings after the pages they quote changed. You get the \
sub-question, the earlier claims whose quotes are no longer in the notes, and the sentences that \
entered the notes, each under the URL of its page. Write the claims those sentences support \
about the sub-question, in place of the earlier ones where the pages now say otherwise.

Return only a JSON object:
{"claims": [{"text": str, "evidence": [{"url": str, "quote": str}], \
"confidence": "high" | "medium" | "conflict"}]}
- Each quote is copied VERBATIM from the sentences given, with its URL; quotes are checked \
against the pages and any quote not found is discarded.
- Every number, date or name in a claim appears in one of its quotes.
- "claims" is [] when the sentences add nothing. Do not use your own knowledge.
"""


def compress_revise_user(subquestion: str, stale: Sequence[str], entered: str) -> str:
    earlier = "\n".join(f"- {c}" for c in stale) or "(none)"
    return (f"Sub-question: {subquestion}\n\nEarlier claims whose quotes left the notes:\n"
            f"{earlier}\n\nSentences that entered the notes:\n{entered}")


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


# --- supervisor: review a wave of findings ----------------------------------------------------

REVIEW_SYSTEM = """\
You lead a research team. Researchers have worked through the sub-questions of a plan; review \
what they found against the brief before the report is written. Look for: sub-questions with no \
or thin evidence, claims marked conflict that another source could settle, and parts of the \
brief that no sub-question covers.

Return only a JSON object:
{"done": bool, "followups": [{"question": str, "queries": [str], "why": str, \
"fills": int | null}]}
- "done": true when the findings answer the brief well enough (then "followups" is []).
- "followups": at most {limit} new sub-questions, each answerable from public web pages and \
not a rewording of one already researched; "queries": 1 to 3 short web-search queries; "why": \
one sentence naming the gap it fills; "fills": the number of the sub-question whose gap it \
fills, or null for a part of the brief nothing covers yet.
"""


def review_system(limit: int) -> str:
    return REVIEW_SYSTEM.replace("{limit}", str(limit))


def review_user(plan: ResearchPlan, findings_text: str, gaps: Sequence[str], wave: int) -> str:
    lines = [f"Topic: {plan.topic}", f"Brief: {plan.brief}", f"Intent: {plan.intent}",
             f"Waves of research so far: {wave}", "", "Findings by sub-question:",
             findings_text.strip() or "(no findings)", "", "Gaps found by checking the findings:"]
    lines += [f"- {g}" for g in gaps] or ["- (none)"]
    return "\n".join(lines)


# --- write report -----------------------------------------------------------------------------

REPORT_SYSTEM = """\
You write a research report from findings that researchers have already verified.

Each finding lists claims; each claim is followed by its evidence, and every piece of evidence \
has a key such as [E3] with a verbatim quote from a source. The references are numbered later, \
in code: you cite by key only.

Write the report as markdown, following the outline you are given exactly. Every heading line \
starts with its tag in square brackets ([summary], [S1], [conclusion], ...); keep the tags, they \
are removed in code. Headings after the tag are yours to word.

Rules:
- Cite the evidence for each statement right after it as [E<n>] (several: [E1][E4]). Cite only \
keys that appear in the findings; never invent keys, URLs or sources.
- Every number in the prose must come from a quote of the evidence it cites.
- When no evidence supports a point a section should cover, write "[insufficient evidence]" \
instead of filling the gap from your own knowledge.
- Where sources disagree (claims marked conflict), present both sides with their citations; do \
not pick a winner.
- Write analysis, not a list of quotes: connect the findings, explain what they mean for the \
topic, and say how strong the evidence is. Do not repeat the quotes' wording at length.
"""

_PARTS = {
    "summary": "## [summary] Executive summary\n(three to five sentences that answer the topic, "
               "with citations)",
    "comparison": "## [comparison] Comparison\n(a markdown table: one row per dimension of "
                  "difference, one column per target ({targets}); each cell a short phrase with "
                  "its [E<n>] citation, or \"[insufficient evidence]\")",
    "recommendation": "## [recommendation] Recommendation\n(the recommendation; the criteria it "
                      "rests on; and when each option is the right choice, each with citations)",
    "conclusion": "## [conclusion] Conclusion\n(what the evidence adds up to: the answer, how "
                  "confident it is, and what is still open)",
}


def frame_parts(plan: ResearchPlan) -> list[str]:
    """The report's parts around the sections, in order, for the plan's intent."""
    parts = ["summary"]
    if plan.intent == "compare" and plan.targets:
        parts.append("comparison")
    return parts + (["recommendation"] if plan.intent == "recommend" else []) + ["conclusion"]


def _part(name: str, plan: ResearchPlan) -> str:
    return _PARTS[name].replace("{targets}", ", ".join(plan.targets))


def _section_outline(plan: ResearchPlan, words: int | None = None) -> list[str]:
    size = f", about {words} words" if words else ""
    return [f"## [S{sq.index + 1}] <heading for sub-question {sq.index + 1}>\n(the answer to "
            f"\"{sq.question}\" from its findings{size})" for sq in plan.sections]


def report_outline(plan: ResearchPlan) -> str:
    """The whole report's outline: title, summary, [comparison], sections, [recommendation],
    conclusion."""
    parts = frame_parts(plan)
    head = [_part(p, plan) for p in parts if p in ("summary", "comparison")]
    tail = [_part(p, plan) for p in parts if p in ("recommendation", "conclusion")]
    return "\n\n".join(["# <title>", *head, *_section_outline(plan), *tail])


def _plan_lines(plan: ResearchPlan) -> list[str]:
    lines = [f"Topic: {plan.topic}", f"Brief: {plan.brief}", f"Intent: {plan.intent}"]
    if plan.targets:
        lines.append("Targets: " + ", ".join(plan.targets))
    lines += ["", "Sub-questions:"]
    # Numbered from 1 as `core.overflow.shrink.render_findings` numbers them, so both agree.
    lines += [f"Sub-question {sq.index + 1}: {sq.question}" for sq in plan.sections]
    return lines


def report_user(plan: ResearchPlan, findings_text: str) -> str:
    return "\n".join([*_plan_lines(plan), "", "Findings:", findings_text.strip() or
                      "(no findings)", "", f"Write the report, about {plan.report_words} words, "
                      "with exactly this outline:", "", report_outline(plan)])


def section_user(plan: ResearchPlan, index: int, findings_text: str, words: int) -> str:
    """One section of a report written section by section."""
    outline = next(o for o, sq in zip(_section_outline(plan, words), plan.sections)
                   if sq.index == index)
    return "\n".join([*_plan_lines(plan), "", "Findings for this section:",
                      findings_text.strip() or "(no findings)", "",
                      "Write only this section of the report (its heading line and its prose):",
                      "", outline])


def frame_user(plan: ResearchPlan, sections_text: str, words: int) -> str:
    """The title and the parts around sections already written (section-by-section mode)."""
    outline = "\n\n".join(["# <title>", *(_part(p, plan) for p in frame_parts(plan))])
    return "\n".join([*_plan_lines(plan), "", "The sections of the report, already written "
                      "from the verified findings:", "", sections_text.strip(), "",
                      f"Write the title and these parts (about {words} words in all), citing "
                      "the keys the sections cite, with exactly this outline:", "", outline])


def complaint_report_outline(error: str) -> str:
    return (f"Your report did not follow the outline: {error}. Write it again as markdown with "
            "every heading line starting with its tag in square brackets, as given.")


# --- framing: every role's system prompt ends with the date and the language ---------------------

def framing(today: str, language: str) -> str:
    name = language_name(language)
    return (f"\n\nToday's date is {today}. Write everything you write yourself (questions, "
            f"notes, reflections, claims, headings, report prose) in {name} ({language}). "
            "Quotes are the one exception: they stay exactly as the page wrote them, in its own "
            f"language. Search queries may be in {name} or in English, whichever finds better "
            "sources.")
