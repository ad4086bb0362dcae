"""Turn an engine's draft into the final report: numbered references assigned here, in code.

An engine cites evidence by catalogue key (`[E3]`). `assemble` numbers references in order of
first use, lists them with their verbatim quotes (markdown characters escaped, so a quote
renders as the page wrote it), marks sections without any citation as
"[insufficient evidence]", adds a "Disputed findings" section for conflicting claims, and flags
numbers in the prose that do not appear in the quotes they cite (ARCHITECTURE.md, "Evidence"). It
never writes an error message into a report: a draft that cannot be assembled raises.

Fixed headings and header words are written in the plan's language (`HEADINGS`: English,
Chinese, Japanese, Korean; English for any other), unless the draft named a part itself.
"""

from __future__ import annotations

import re
from typing import Sequence

from core.models import ReportDraft
from core.text.escaping import defang_markdown, markdown_link, markdown_text
from core.models import Citation, Evidence, Finding, ResearchPlan, Report, stable_id

_KEY = re.compile(r"\[(E\d+(?:\s*,\s*E\d+)*)\]")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?")
# A sentence ends after its punctuation and any citation keys that follow it.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？\]])(\s+)(?!\s|\[E\d)")
INSUFFICIENT = "[insufficient evidence]"

# The report's fixed words in its language; any other language gets English. A draft may name
# its own parts (a model writes them in the report's language); references, disputes and the
# header lines are always ours. "[insufficient evidence]" stays as is: it is a marker that code
# and readers search for, not a heading.
HEADINGS: dict[str, dict[str, str]] = {
    "en": {"summary": "Executive summary", "comparison": "Comparison",
           "recommendation": "Recommendation", "conclusion": "Conclusion",
           "disputed": "Disputed findings", "references": "References", "topic": "Topic",
           "intent": "Intent", "describe": "describe", "compare": "compare",
           "recommend": "recommend", "evidence": "Evidence",
           "thin": "thin: {quotes} quote(s) from {pages} page(s); {empty} of {sections} "
                   "sections without evidence",
           "unanswered": "Unanswered", "unanswered_note": "no evidence about the subject for: "
                                                          "{parts}", "join": "; "},
    "zh": {"summary": "执行摘要", "comparison": "对比", "recommendation": "建议", "conclusion": "结论",
           "disputed": "存在争议的发现", "references": "参考文献", "topic": "主题", "intent": "意图",
           "describe": "描述", "compare": "比较", "recommend": "推荐", "evidence": "证据",
           "thin": "薄弱：{quotes} 条引文，来自 {pages} 个页面；{sections} 个部分中有 {empty} 个没有证据",
           "unanswered": "未回答", "unanswered_note": "以下部分没有关于主题的证据：{parts}", "join": "；"},
    "ja": {"summary": "要旨", "comparison": "比較", "recommendation": "推奨", "conclusion": "結論",
           "disputed": "見解が分かれる点", "references": "参考文献", "topic": "トピック",
           "intent": "意図", "describe": "説明", "compare": "比較", "recommend": "推奨",
           "evidence": "根拠",
           "thin": "乏しい：{pages} ページから {quotes} 件の引用。{sections} 節のうち {empty} 節は根拠なし",
           "unanswered": "未回答", "unanswered_note": "主題についての根拠がない部分：{parts}",
           "join": "／"},
    "ko": {"summary": "요약", "comparison": "비교", "recommendation": "권장 사항", "conclusion": "결론",
           "disputed": "논쟁이 있는 발견", "references": "참고 문헌", "topic": "주제", "intent": "의도",
           "describe": "설명", "compare": "비교", "recommend": "추천", "evidence": "근거",
           "thin": "부족: {pages}개 페이지에서 인용 {quotes}개, {sections}개 절 중 {empty}개는 근거 없음",
           "unanswered": "답하지 못함", "unanswered_note": "주제에 관한 근거가 없는 부분: {parts}",
           "join": "; "},
}


def fixed_heading(part: str, language: str) -> str:
    """The fixed heading (or header word) `part` in `language`:
    fixed_heading("references", "zh") -> "参考文献"; English for languages without a table."""
    primary = re.split(r"[-_]", language.strip().lower(), maxsplit=1)[0]
    return HEADINGS.get(primary, HEADINGS["en"])[part]


def reference_headings() -> tuple[str, ...]:
    """Every language's references heading: what a reader of stored markdown looks for."""
    return tuple(dict.fromkeys(table["references"] for table in HEADINGS.values()))


def evidence_catalog(findings: Sequence[Finding]) -> list[tuple[str, Evidence]]:
    """Every piece of evidence with its key E1, E2, ... in findings → claims → evidence order."""
    out: list[tuple[str, Evidence]] = []
    for finding in findings:
        for claim in finding.claims:
            for ev in claim.evidence:
                out.append((f"E{len(out) + 1}", ev))
    return out


def report_id_for(batch_id: str, topic_id: str) -> str:
    """Deterministic, so a rerun of the same (batch, topic) replaces rather than duplicates."""
    return "r_" + stable_id(batch_id, topic_id, "report", length=12)


def cited_keys(text: str) -> set[str]:
    """The evidence keys a written text cites: "[E1]", "[E2, E5]"."""
    return {k.strip() for m in _KEY.finditer(text) for k in m.group(1).split(",")}


class _Numberer:
    """Assigns reference numbers in order of first use; one number per distinct (url, quote)."""

    def __init__(self, catalog: dict[str, Evidence]) -> None:
        self.catalog = catalog
        self.numbers: dict[tuple[str, str], int] = {}
        self.citations: list[Citation] = []
        self.unknown: list[str] = []

    def number(self, key: str) -> int | None:
        ev = self.catalog.get(key)
        if ev is None:
            self.unknown.append(key)
            return None
        ident = (ev.url, ev.quote)
        if ident not in self.numbers:
            self.numbers[ident] = len(self.numbers) + 1
            self.citations.append(Citation(number=self.numbers[ident], url=ev.url,
                                           title=ev.title, quote=ev.quote))
        return self.numbers[ident]

    def quote(self, number: int) -> str:
        return self.citations[number - 1].quote


def _figures(text: str) -> set[str]:
    """The numbers a text states, compared as tokens: "4" is not in "40" nor in "3.14"."""
    return {_figure(n) for n in _NUMBER.findall(text)}


def _figure(number: str) -> str:
    return number.replace(",", "").rstrip("%")


def _cite(body: str, numberer: _Numberer, flags: list[str], where: str) -> str:
    """Replace [E..] keys with [n]; flag numbers a sentence states that its quotes do not."""
    out: list[str] = []
    pieces = _SENTENCE_END.split(body)  # sentence, separator, sentence, ...
    for i in range(0, len(pieces), 2):
        sentence, cited = pieces[i], []

        def swap(match: re.Match[str]) -> str:
            nums = [numberer.number(k.strip()) for k in match.group(1).split(",")]
            nums = [n for n in nums if n is not None]
            cited.extend(nums)
            return "".join(f"[{n}]" for n in dict.fromkeys(nums))

        sentence = _KEY.sub(swap, sentence)
        if cited:
            quoted = set().union(*(_figures(numberer.quote(n)) for n in cited))
            prose = re.sub(r"\[\d+\]", "", sentence)
            for num in dict.fromkeys(_NUMBER.findall(prose)):  # order of appearance: reproducible
                if _figure(num) not in quoted:
                    flags.append(f"{where}: the number {num} does not appear in its cited quote")
                    sentence = re.sub(rf"(?<![\w.\[]){re.escape(num)}(?![\w\]]|[.,]\d)",
                                      f"{num} [number not in source]", sentence, count=1)
        if sentence.strip():
            # Keep the original separator so paragraphs and list items stay on their own lines.
            out += [pieces[i - 1] if out else "", sentence]
    return "".join(out)


def escape_markdown(text: str) -> str:
    """`text` shown as written: characters markdown would read as formatting are escaped, so
    a quoted `__enter__()` stays `__enter__()` rather than a bold "enter()" (one line; see
    core.text.escaping.markdown_text)."""
    return markdown_text(text)


def thin_evidence(quotes: int, pages: int, empty: int, sections: int) -> bool:
    """Too little to rest a report on: under three quotes, one page, or more than one section
    without evidence (and at least a third of them)."""
    return quotes < 3 or pages < 2 or (empty > 1 and 3 * empty >= sections)


def assemble(plan: ResearchPlan, findings: Sequence[Finding], draft: ReportDraft, *,
             report_id: str, engine: str, notice: str | None = None,
             fallbacks: str = "", unanswered: Sequence[str] = ()) -> Report:
    """The report in the intent's shape: executive summary, comparison table (compare), one
    section per section of the plan, recommendation (recommend), conclusion, disputed
    findings, references. `fallbacks` names the roles the extractive engine answered because
    the model's answers stayed invalid (core.engine.fallback); `unanswered`, the parts of the
    topic no evidence answered (core.relevance.gate): the header says both."""
    catalog = dict(evidence_catalog(findings))
    numberer = _Numberer(catalog)
    flags: list[str] = []
    drafted = {s.subquestion_index: s for s in draft.sections}

    own = dict(draft.headings)
    lang = plan.language

    def part(name: str, body: str | None) -> list[str]:
        if not body or not body.strip():
            return []
        # The draft's own heading for the part, else ours in the report's language.
        heading = own.get(name) or fixed_heading(name, lang)
        lines = body.strip().splitlines() if name == "comparison" else [body]
        return [f"## {markdown_text(heading)}", "",
                "\n".join(_cite(defang_markdown(line), numberer, flags, heading)
                          for line in lines), ""]

    # Topics, titles and headings are text (a topic may be any string a user typed); the
    # draft's prose is markdown, whose links may only go to the web or a file.
    parts = [f"# {markdown_text(draft.title)}", ""]
    if notice:
        parts += [f"> {notice}", ""]
    parts += [f"**{fixed_heading('topic', lang)}:** {markdown_text(plan.topic)}  ",
              f"**{fixed_heading('intent', lang)}:** {fixed_heading(plan.intent, lang)}", ""]
    if fallbacks:
        parts += [f"**Fallbacks:** the extractive engine answered for the model in: "
                  f"{markdown_text(fallbacks)} (its answers stayed invalid)", ""]
    header_end = len(parts) - 1  # what went unanswered, and thin evidence, are said here
    empty: list[str] = []
    parts += part("summary", draft.summary)
    if plan.intent == "compare":
        parts += part("comparison", draft.comparison_table)

    for sq in plan.sections:
        section = drafted.get(sq.index)
        heading = section.heading if section else sq.question
        body = _cite(defang_markdown(section.body), numberer, flags, heading) if section else ""
        if not re.search(r"\[\d+\]", body) and INSUFFICIENT not in body:
            body = (body.strip() + " " if body.strip() else "") + INSUFFICIENT
            # named as the part it answers, as the gate names the parts it found unanswered
            empty.append(plan.parts[sq.part].heading if sq.part is not None
                         and sq.part < len(plan.parts) else heading)
        parts += [f"## {markdown_text(heading)}", "", body.strip(), ""]
    if plan.intent == "recommend":
        parts += part("recommendation", draft.recommendation)
    parts += part("conclusion", draft.conclusion)

    disputed = [(f, c) for f in findings for c in f.claims if c.confidence == "conflict"]
    if disputed:
        parts += [f"## {fixed_heading('disputed', lang)}", ""]
        for finding, claim in disputed:
            keys = [k for k, ev in catalog.items() if ev in claim.evidence]
            refs = _cite("".join(f"[{k}]" for k in keys), numberer, flags, "Disputed")
            parts.append(f"- *{markdown_text(finding.subquestion)}*: "
                         f"{markdown_text(claim.text)} {refs}".rstrip())
        parts.append("")

    if numberer.unknown:
        flags.append("draft cited unknown evidence keys: " + ", ".join(sorted(set(numberer.unknown))))
    parts += [f"## {fixed_heading('references', lang)}", ""]
    for c in numberer.citations:
        # The title is text, not the link's label: Prefect's UI shows a label as typed,
        # backslashes and all. The link is labelled with its host, and only http(s) or file.
        title = markdown_text(c.title or c.url)
        parts.append(f"{c.number}. {title} ({markdown_link(c.url)}) — "
                     f"“{markdown_text(c.quote)}”")
    if not numberer.citations:
        parts.append(INSUFFICIENT)
    pages = len({c.url.split("#", 1)[0] for c in numberer.citations})
    thin = thin_evidence(len(numberer.citations), pages, len(empty), len(plan.sections))
    header: list[str] = []
    # A part the gate found answered by quotes elsewhere ("how json and pickle differ", from
    # quotes on each) whose own section came out empty is unanswered as the report reads.
    unanswered = tuple(dict.fromkeys([*unanswered, *(empty if plan.parts else ())]))
    if unanswered:
        note = fixed_heading("unanswered_note", lang).format(
            parts=fixed_heading("join", lang).join(unanswered))
        header.append(f"**{fixed_heading('unanswered', lang)}:** {markdown_text(note)}")
    if thin:
        header.append(f"**{fixed_heading('evidence', lang)}:** " + fixed_heading(
            "thin", lang).format(quotes=len(numberer.citations), pages=pages, empty=len(empty),
                                 sections=len(plan.sections)))
    if header:
        parts[header_end - 1] += "  "
        parts[header_end:header_end] = ["  \n".join(header)]
    return Report(report_id=report_id, topic=plan.topic, title=draft.title,
                  markdown="\n".join(parts).rstrip() + "\n", citations=tuple(numberer.citations),
                  engine=engine, flags=tuple(flags), language=plan.language,
                  unanswered=unanswered, sections=len(plan.sections),
                  sections_without_evidence=len(empty), thin_evidence=thin)
