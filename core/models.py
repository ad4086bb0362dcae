"""The data that flows between pipeline steps.

Every model here is a pydantic model so it serialises cleanly into Prefect results and DuckDB
rows, except an engine's draft of a report (`ReportDraft`), a frozen dataclass that never leaves
the report task. Values that never change after creation are frozen. Nothing here performs I/O.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.text.language import resolve_language

Intent = Literal["describe", "compare", "recommend"]
Confidence = Literal["high", "medium", "conflict"]
Role = Literal["system", "user", "assistant", "tool"]
ReviewOnTimeout = Literal["proceed", "cancel"]


MAX_EDITION_CHARS = 100  # an edition's name: a date, "week-49", a release


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


def stable_id(*parts: str, length: int = 16) -> str:
    """A short deterministic id: the same inputs always give the same id across runs."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:length]


class TopicOptions(_Frozen):
    """How one topic is researched and written: declared once, here.

    The same fields are the topic flow's `options` parameter (a form in the Prefect UI), the
    options of `researchflow run` and `batch` (flows.options builds them from these fields,
    their bounds and descriptions) and the optional columns of a batch CSV. Its JSON schema
    (an MCP client's `options`, the Prefect UI's form) says what they are for the person or
    model choosing them, not this docstring.
    """

    model_config = ConfigDict(json_schema_extra={"description": (
        "How deep to research the topic and how to write the report. Every field is optional; "
        "more sub-questions, rounds, pages and waves find more but take longer and cost "
        "more.")})

    max_subquestions: int = Field(default=4, ge=1, le=6,
                                  description="Sub-questions the plan asks (at most).")
    max_rounds: int = Field(default=3, ge=1, le=6, description="Search rounds per sub-question.")
    max_pages: int = Field(default=6, ge=1, le=30, description=(
        "Pages read per sub-question (the researcher chooses which)."))
    max_waves: int = Field(default=2, ge=1, le=6, description=(
        "Research waves: the plan's sub-questions, then the supervisor's follow-ups for what "
        "they left open."))
    language: str | None = Field(default=None, description=(
        "Language of the prompts and the report: a code or name (zh, Chinese, 中文); default: "
        "the topic's own."))
    report_words: int = Field(default=1_200, ge=200, le=20_000, description=(
        "Target length of the report in words (a long report is written section by section)."))
    review_plan: bool = Field(default=False, description=(
        "Pause after planning until someone approves the sub-questions (the Prefect UI's "
        "form, or the terminal for `run` without a Prefect server); they may edit, drop or "
        "add sub-questions first."))
    review_timeout: int = Field(default=3_600, ge=10, le=7 * 86_400, description=(
        "Seconds to wait for the plan's review; then review_on_timeout decides."))
    review_on_timeout: ReviewOnTimeout = Field(default="cancel", description=(
        "When nobody reviewed the plan in time: 'proceed' researches it as planned, 'cancel' "
        "cancels the topic (nothing is spent but the plan)."))

    @field_validator("language", mode="before")
    @classmethod
    def _language(cls, v: object) -> object:
        """A name or code as the user wrote it ("Chinese", "zh-CN") becomes its code."""
        if v is None or (isinstance(v, str) and not v.strip()):
            return None
        return resolve_language(str(v), "")


TOPIC_OPTIONS: tuple[str, ...] = tuple(TopicOptions.model_fields)
MAX_TOPIC_CHARS = 2_000
# C0 controls but tab, newline and carriage return; DEL; C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CONTROL_NAMES = {"\x00": "NUL", "\x07": "BEL", "\x08": "BS", "\x1b": "ESC", "\x7f": "DEL",
                  "\x9b": "CSI"}


class Topic(TopicOptions):
    """One research request: a CSV row or a CLI argument, with its options."""

    text: str = Field(min_length=3, max_length=MAX_TOPIC_CHARS)
    batch_id: str = "adhoc"
    # A scheduled batch's run (core.reports.editions): each edition stores its own report. "": none
    # (a lone topic), the topic has one report that a rerun replaces.
    edition: str = Field(default="", max_length=MAX_EDITION_CHARS)

    @field_validator("text")
    @classmethod
    def _no_control_characters(cls, v: str) -> str:
        # A topic is printed, stored, logged and sent to models: ESC, BEL or NUL in it would act
        # on a terminal or cut a string short somewhere downstream. Refused, not silently cut.
        found = sorted({c for c in v if _CONTROL.fullmatch(c)})
        if found:
            names = ", ".join(_CONTROL_NAMES.get(c, f"U+{ord(c):04X}") for c in found[:5])
            raise ValueError(f"holds control characters ({names}); remove them")
        return v

    @classmethod
    def of(cls, text: str, options: TopicOptions, batch_id: str = "adhoc",
           edition: str = "") -> "Topic":
        return cls(text=text, batch_id=batch_id, edition=edition, **options.model_dump())

    def timeless(self) -> "Topic":
        """The topic without its edition: what planning depends on, so a new edition of an
        unchanged topic reuses its plan."""
        return self.model_copy(update={"edition": ""})

    @property
    def options(self) -> TopicOptions:
        return TopicOptions(**self.model_dump(include=set(TOPIC_OPTIONS)))

    @property
    def topic_id(self) -> str:
        if self.edition:
            return stable_id(self.batch_id, self.text.strip().lower(), self.edition)
        return stable_id(self.batch_id, self.text.strip().lower())


class SubQuestion(_Frozen):
    index: int
    question: str
    queries: tuple[str, ...] = ()
    focus: tuple[str, ...] = ()  # what the answer must be about (compared targets, the subject)
    part: int | None = None  # the part of the question it answers (ResearchPlan.parts)
    language: str = "en"  # what the researcher writes its notes in (the topic's language)
    wave: int = 1  # 1: the plan's; n > 1: a follow-up the supervisor asked after wave n - 1
    why: str = ""  # for a follow-up: the gap it was asked to fill
    parent: int | None = None  # for a follow-up: the sub-question whose gap it fills

    @property
    def number(self) -> int:
        """The sub-question as people count it (from 1), in task names and artifacts alike."""
        return self.index + 1


class FollowUp(_Frozen):
    """A sub-question the supervisor asks after reviewing a wave of findings."""

    question: str
    queries: tuple[str, ...] = ()
    why: str = ""
    parent: int | None = None  # index of the sub-question it completes; None: a new part


PartKind = Literal["part", "option", "differ"]


class Part(_Frozen):
    """One thing the topic asks, read from it in code (core.relevance): the gate judges each
    part answered or not from its evidence, whichever engine researched it."""

    text: str  # as the topic writes it: "what are its main pitfalls"
    heading: str  # the part as a heading, in the topic's words: "What are sqlite3's main pitfalls?"
    # What its evidence must be about: the subject, or one option (not "keys": dict() and
    # Prefect's input walk read a model with a `keys` attribute as a mapping).
    about: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # its words the corpus never uses (what it has no page about)
    unknown: tuple[str, ...] = ()  # names among them: nothing can answer around a missing name
    kind: PartKind = "part"  # an option of a comparison, or how the options differ
    # What it asks about, each word weighed by its rarity in the corpus: evidence answers it
    # when one page's quotes name most of that weight (core.relevance.gate).
    words: tuple[tuple[str, float], ...] = ()


class ResearchPlan(_Frozen):
    topic: str
    brief: str
    intent: Intent = "describe"
    targets: tuple[str, ...] = ()  # the options being compared, when intent == "compare"
    subquestions: tuple[SubQuestion, ...]
    language: str = "en"  # ISO 639-1: every prompt asks for it and the report is written in it
    report_words: int = 1_200  # the report's target length
    parts: tuple[Part, ...] = ()  # what the topic asks, read in code (core.relevance)
    aspects: tuple[str, ...] = ()  # what the question names of every option: "a small web app"

    @property
    def sections(self) -> tuple[SubQuestion, ...]:
        """The sub-questions the report has a section for: the plan's, and follow-ups that
        opened a new part (a follow-up filling a gap is reported in its parent's section)."""
        return tuple(sq for sq in self.subquestions if sq.parent is None)

    def with_followups(self, followups: "tuple[FollowUp, ...] | list[FollowUp]",
                       wave: int) -> "ResearchPlan":
        """The plan with `followups` appended as sub-questions of `wave`."""
        start = len(self.subquestions)
        # A follow-up of a follow-up completes the same section: point at the section's own.
        root = {sq.index: sq.index if sq.parent is None else sq.parent
                for sq in self.subquestions}
        # A follow-up answers the part its section answers, and must be about what it is.
        part = {sq.index: (sq.part, sq.focus) for sq in self.subquestions}
        added = tuple(SubQuestion(index=start + i, question=f.question,
                                  queries=f.queries or (f.question,), language=self.language,
                                  wave=wave, why=f.why, parent=root.get(f.parent),
                                  part=part.get(root.get(f.parent), (None, ()))[0],
                                  focus=part.get(root.get(f.parent), (None, ()))[1])
                      for i, f in enumerate(followups))
        return self.model_copy(update={"subquestions": self.subquestions + added})


@dataclass(frozen=True)
class WordStats:
    """One word of a topic as a corpus knows it."""

    documents: int  # documents that use it
    titled: int  # documents whose title or a heading names it


@dataclass(frozen=True)
class Vocabulary:
    """What a corpus says of a topic's words (core.search.corpus_vocab): `words` holds those it
    could measure (a word made only of the index's stop words is not there)."""

    documents: int
    words: dict[str, WordStats]


class SearchResult(_Frozen):
    """One hit, shaped like a web search result whatever the backend."""

    url: str
    title: str
    snippet: str = ""
    rank: int = 0


class Heading(_Frozen):
    """A real heading of a document (HTML h1-h3, markdown #, a Word heading style, a PDF
    outline entry): its section starts at `start` in the document's text."""

    start: int
    level: int = 1
    text: str


def heading_chain(headings: "tuple[Heading, ...] | list[Heading]", offset: int) -> list[Heading]:
    """The headings in effect at `offset` of a text (sorted by start), outermost first."""
    chain: list[Heading] = []
    for heading in headings:
        if heading.start > offset:
            break
        chain = [h for h in chain if h.level < heading.level] + [heading]
    return chain


class Source(_Frozen):
    """A page (or corpus document) that was read: its full extracted text is kept, with the
    headings its sections have where the document has them (offsets into `text`)."""

    url: str
    title: str
    text: str
    headings: tuple[Heading, ...] = ()
    # Spans of `text` its corpus repeats on many pages (a generator's notice, a footer): never
    # quoted (core.search.corpus marks them; a web page has none).
    boilerplate: tuple[tuple[int, int], ...] = ()

    @property
    def source_id(self) -> str:
        return stable_id(self.url)

    def section_at(self, offset: int) -> str:
        """The headings in effect at `offset`, outermost first: "Reference › Cursor objects"."""
        return " › ".join(h.text for h in heading_chain(self.headings, offset))


class ToolCall(_Frozen):
    id: str
    name: str
    arguments: dict = Field(default_factory=dict)


class Message(_Frozen):
    """One turn of a transcript: an AI turn (optionally calling tools) or a tool result."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # set on role == "tool": which call this answers
    name: str | None = None


class PageNotes(_Frozen):
    """One search hit read and condensed: the unit of retry and caching of research.

    `source` is None when the page could not be read; `reason` then says why.
    """

    url: str
    source: Source | None = None
    notes: str = ""
    reason: str = ""


class Transcript(BaseModel):
    """A researcher's working memory for one sub-question."""

    subquestion: SubQuestion
    messages: list[Message] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    queries_run: list[str] = Field(default_factory=list)


class Evidence(_Frozen):
    url: str
    title: str
    quote: str  # verbatim from the source's extracted text
    section: str = ""  # the headings the quote sits under in its page (Source.section_at)


class Claim(_Frozen):
    text: str
    evidence: tuple[Evidence, ...] = ()
    confidence: Confidence = "medium"


class Finding(_Frozen):
    """What one researcher concluded about its sub-question, with the quotes that back it."""

    subquestion_index: int
    subquestion: str
    claims: tuple[Claim, ...]
    raw_notes: str = ""

    @property
    def support(self) -> int:
        """How much quoted evidence backs this finding (used to cut the weakest first)."""
        return sum(len(c.evidence) for c in self.claims)


@dataclass(frozen=True)
class SectionDraft:
    subquestion_index: int
    heading: str
    body: str  # prose citing evidence as [E<n>]


# The parts of a report besides its sections, under their default headings.
PART_HEADINGS = {"summary": "Executive summary", "comparison": "Comparison",
                 "recommendation": "Recommendation", "conclusion": "Conclusion"}


@dataclass(frozen=True)
class ReportDraft:
    """A report before its references are numbered: prose citing evidence as [E<n>].

    Parts follow the intent: every report has a summary, the sections and a conclusion; a
    comparison has its table, a recommendation its recommendation. `headings` holds the
    headings the writer chose for those parts (in the report's language).
    """

    title: str
    summary: str
    sections: tuple[SectionDraft, ...]
    comparison_table: str | None = None  # markdown table, for compare intents
    recommendation: str | None = None  # for recommend intents
    conclusion: str = ""
    headings: tuple[tuple[str, str], ...] = ()  # (part, heading) where not the default

    def heading(self, part: str) -> str:
        return dict(self.headings).get(part) or PART_HEADINGS[part]


class Citation(_Frozen):
    number: int
    url: str
    title: str
    quote: str


class Report(_Frozen):
    report_id: str
    topic: str
    title: str
    markdown: str
    citations: tuple[Citation, ...]
    engine: str
    flags: tuple[str, ...] = ()  # e.g. numbers in prose not found in their quote
    language: str = "en"
    unanswered: tuple[str, ...] = ()  # the topic's parts no evidence answered (core.relevance)
    # How strong its evidence is (core.reports.report `thin_evidence`): the sections of the plan,
    # those left without a cited quote, and whether the report says its evidence is thin.
    sections: int = 0
    sections_without_evidence: int = 0
    thin_evidence: bool = False
    # When the store saved it (read back by core.store.query.read_report); None before that.
    created_at: datetime | None = None


class ResearchResult(_Frozen):
    """Everything one topic produced, ready for the store."""

    topic: Topic
    plan: ResearchPlan
    sources: tuple[Source, ...]
    findings: tuple[Finding, ...]
    report: Report
