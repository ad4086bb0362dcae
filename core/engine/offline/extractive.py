"""The offline extractive engine: every role, with no network and no model weights.

It plans with core.engine.offline.outline (the question's own parts, its subject read against
the corpus's vocabulary), picks the sentences of what was read that answer each sub-question
(core.engine.offline.selection: about the subject, ranked by words and meaning, near-duplicates
once), quotes them verbatim as evidence, and assembles the report from those quotes, with a
summary chosen for coverage of the sections (core.engine.offline.summary). Meaning comes from
the shared offline embedder (core.text.embedding), the only "model" here: 16 MB of word
vectors, no generation.
Deterministic: the same corpus and topic give the same report. Its reports say plainly that they
are extractive, not model-written prose.
"""

from __future__ import annotations

from typing import Sequence

from core.text.embedding import Embedder
from core.engine.base import ReportDraft, SectionDraft
from core.engine.offline.outline import draft_plan, search_words
from core.engine.offline.words import words
from core.engine.offline.selection import corroborated, pick, rank
from core.relevance.about import about as on_subject, agree, names
from core.engine.offline.summary import summarize
from core.engine.sentences import query_words, terms
from core.models import (Claim, Evidence, Finding, FollowUp, ResearchPlan, SearchResult,
                         Source, SubQuestion, Topic, Transcript)
from core.relevance.subject import VocabularyOf
from core.reports.report import escape_markdown, evidence_catalog

NOTICE = words("en")["notice"]


def _cell(text: str, limit: int = 220) -> str:
    """A table cell: long claims shortened before their citation keys (pipes come escaped)."""
    body, _, keys = text.rpartition(" ")
    if len(body) > limit:
        body = body[:limit].rsplit(" ", 1)[0] + " …"
    return f"{body} {keys}"


# Words of the question templates that say nothing a search engine could match on.
_GENERIC = frozenset({"differ", "differs", "exist", "exists", "matter", "matters"})


def _rewrite_key(query: str) -> str:
    """A query compared case-, space- and quote-insensitively: a phrase search for words that
    found nothing readable unquoted is not worth another search."""
    return " ".join(query.replace('"', " ").lower().split())


def _coverage(plan: ResearchPlan, findings: Sequence[Finding],
              sections: Sequence[SectionDraft]) -> str:
    """An extractive report's conclusion: how much of the plan the quotes answer, not prose
    the engine cannot write."""
    answered = {s.subquestion_index for s in sections if s.body.strip()}
    open_ = [sq.question for sq in plan.sections if sq.index not in answered]
    corroborated = sum(c.confidence == "high" for f in findings for c in f.claims)
    say = words(plan.language)
    text = say["coverage"].format(answered=len(plan.sections) - len(open_),
                                  total=len(plan.sections), corroborated=corroborated)
    if open_:
        text += say["open"].format(questions=say["join"].join(open_))
    return text

class ExtractiveEngine:
    name = "offline-extractive"
    notice = NOTICE  # English; a report in another language carries notice_for(language)

    @staticmethod
    def notice_for(language: str | None) -> str:
        """The notice a report in `language` carries (English for a language without one)."""
        return words(language)["notice"]

    def __init__(self, claims_per_finding: int = 6, claims_per_section: int = 4,
                 notes_per_source: int = 3, embedder: Embedder | None = None,
                 vocabulary: VocabularyOf | None = None) -> None:
        self.claims_per_section = claims_per_section
        self.claims_per_finding = claims_per_finding
        self.notes_per_source = notes_per_source
        self._embedder = embedder  # None: the process's shared one, loaded on first use
        # What the corpus says of a topic's words (its subject, and what it never names);
        # None (a web search): the topic's named things are its subject.
        self._vocabulary = vocabulary

    def for_role(self, role: str) -> "ExtractiveEngine":
        return self

    def context_window(self) -> int | None:
        return None  # no model: nothing to fit

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan:
        return draft_plan(topic, self._vocabulary)

    # -- research rounds ----------------------------------------------------------------------
    def next_queries(self, transcript: Transcript, round_index: int, *,
                     max_tokens: int | None = None, scale: float = 1.0) -> list[str]:
        """Another round only for query terms no source sentence has covered yet."""
        seen = set(terms(" ".join(s.text for s in transcript.sources)))
        # Compared as stems, queried as written (search backends stem for themselves).
        missing = [w for w in query_words(transcript.subquestion.question)
                   if not set(terms(w)) <= seen]
        query = " ".join(missing[:3])
        if not missing or query in transcript.queries_run:
            return []
        return [query]

    def rewrite_queries(self, subquestion: SubQuestion, failed: Sequence[str],
                        seen: Sequence[SearchResult], *,
                        max_tokens: int | None = None) -> list[str]:
        """Up to three variants built from the sub-question's content words: the subject alone
        (its focus, or else its first two content words; compared targets as "A vs B"), each
        multi-word subject phrase quoted (with the first aspect word), and the subject with each
        aspect word. None already run, quoted or not; the same sub-question always gives the
        same variants."""
        words = query_words(subquestion.question)
        phrases = [" ".join(p.split()) for p in subquestion.focus if query_words(p)]
        subject_words = (list(dict.fromkeys(w for p in phrases for w in query_words(p)))
                         if phrases else words[:2])
        aspects = [w for w in words if w not in subject_words and w not in _GENERIC]
        if len(phrases) >= 2 and all(len(p.split()) == 1 for p in phrases):
            subject = " vs ".join(p.lower() for p in phrases[:3])
        else:
            subject = " ".join(subject_words[:6])
        first = f" {aspects[0]}" if aspects else ""
        candidates = [subject]
        candidates += [f'"{p}"{first}' for p in phrases if len(p.split()) > 1]
        candidates += [f"{subject} {a}" for a in aspects]
        ran = {_rewrite_key(q) for q in (*failed, *subquestion.queries)}
        out: list[str] = []
        for query in candidates:
            key = _rewrite_key(query)
            if query.strip() and key not in ran:
                ran.add(key)
                out.append(query)
        return out[:3]

    def choose_pages(self, transcript: Transcript, candidates: Sequence[SearchResult],
                     limit: int, *, max_tokens: int | None = None) -> list[int]:
        """The search backend's own ranking: the first `limit` results."""
        return list(range(min(limit, len(candidates))))

    def review(self, plan: ResearchPlan, findings: Sequence[Finding], gaps: Sequence[str],
               wave: int, limit: int, *, max_tokens: int | None = None,
               scale: float = 1.0) -> list[FollowUp]:
        """One follow-up per section left without evidence: the content words of its question
        with the topic's other words, searched together as written (the plan searched each
        part with its subject alone)."""
        supported = {f.subquestion_index for f in findings if f.support}
        asked = {q.lower() for sq in plan.subquestions for q in sq.queries}
        out: list[FollowUp] = []
        for sq in plan.sections:
            covered = sq.index in supported or any(
                f.parent == sq.index and f.index in supported for f in plan.subquestions)
            if covered:
                continue
            # The section's words and the rest of the topic's, in one search.
            terms_asked = list(dict.fromkeys(search_words(sq.question) + search_words(plan.topic)))
            query = " ".join(terms_asked[:6])
            if not query or query.lower() in asked:
                continue
            asked.add(query.lower())  # sections sharing a subject get one follow-up, not one each
            ask = words(plan.language)["followup"].format(query=query)
            out.append(FollowUp(question=ask,
                                queries=(query,), parent=sq.index,
                                why=f"wave {wave} found no quoted evidence for: {sq.question}"))
        return out[:limit]

    def condense(self, subquestion: SubQuestion, source: Source, *,
                 max_tokens: int | None = None) -> str:
        best = pick(rank(subquestion, [source], self._embedder), self.notes_per_source)
        return "\n".join(f"- {c.sentence.clean}" for c in best)

    # -- compress -----------------------------------------------------------------------------
    def compress(self, transcript: Transcript, *, max_tokens: int | None = None) -> Finding:
        sq = transcript.subquestion
        ranked = rank(sq, transcript.sources, self._embedder)
        claims = [Claim(text=c.sentence.clean,
                        evidence=(Evidence(url=c.source.url, title=c.source.title,
                                           quote=c.sentence.text,
                                           section=c.source.section_at(c.sentence.start)),),
                        confidence="high" if corroborated(c, ranked) else "medium")
                  for c in pick(ranked, self.claims_per_finding, sq.focus)]
        notes = "\n".join(m.content for m in transcript.messages if m.role == "tool")
        return Finding(subquestion_index=sq.index, subquestion=sq.question, claims=tuple(claims),
                       raw_notes=notes)

    # -- report -------------------------------------------------------------------------------
    def write_report(self, plan: ResearchPlan, findings: Sequence[Finding], *,
                     max_tokens: int | None = None) -> ReportDraft:
        keys = {id(ev): key for key, ev in evidence_catalog(findings)}

        def cite(claim: Claim) -> str:
            # The claim is a page's sentence: shown as written, not read as markdown.
            return (escape_markdown(claim.text) + " "
                    + "".join(f"[{keys[id(e)]}]" for e in claim.evidence))

        # Researchers run independently: a sentence found for two sections is said once, in
        # the one whose own words it names most ("serve quorum reads", not "replicate
        # writes"), then the one that ranked it highest, then the earlier one.
        subject = {t for sq in plan.subquestions for k in sq.focus for t in terms(k)}
        own = [set(terms(f.subquestion)) - subject for f in findings]
        focus = {sq.index: sq.focus for sq in plan.subquestions}
        home: dict[str, tuple[int, int, int]] = {}
        for s_i, f in enumerate(findings):
            for rank_i, c in enumerate(f.claims):
                said = terms(c.text)
                hits = sum(any(agree(w, t) for t in said) for w in own[s_i]) + _fits(
                    c, focus.get(f.subquestion_index, ()), plan.targets)
                home[c.text] = min(home.get(c.text, (-hits, rank_i, s_i)), (-hits, rank_i, s_i))
        used: set[str] = set()
        sections, shown = [], []
        for s_i, f in enumerate(findings):
            fresh = []
            for c in f.claims:
                if (c.text not in used and home[c.text][2] == s_i
                        and len(fresh) < self.claims_per_section):
                    used.add(c.text)
                    fresh.append(c)
            shown.append((f.subquestion, fresh))
            sections.append(SectionDraft(subquestion_index=f.subquestion_index,
                                         heading=f.subquestion,
                                         body="\n\n".join(cite(c) for c in fresh)))
        summary = " ".join(cite(c) for c in summarize(plan, shown, self._embedder))
        table = self._comparison_table(plan, findings, cite) if plan.intent == "compare" else None
        recommendation = None
        if plan.intent == "recommend" and findings:
            # The plan's last aspect asks when each option is the right choice.
            last = max(findings, key=lambda f: f.subquestion_index)
            picks = [cite(c) for c in last.claims[:2]]
            recommendation = (words(plan.language)["choose"] + "\n\n"
                              + "\n\n".join(picks)) if picks else None
        return ReportDraft(title=words(plan.language)["title"].format(topic=plan.topic),
                           summary=summary,
                           sections=tuple(sections), comparison_table=table,
                           recommendation=recommendation,
                           conclusion=_coverage(plan, findings, sections))

    def _comparison_table(self, plan: ResearchPlan, findings: Sequence[Finding], cite) -> str:
        """One column per option; a row per aspect the question names ("a small web app"),
        then per heading the sources give beside two options or more ("Thread Objects" and
        "Process objects" are not one; "Connection objects" twice is), each cell a quote about
        its option. Neither: one row named by the options themselves."""
        options = plan.targets
        mine = _claims_by_option(plan, findings)
        used: set[str] = set()  # a sentence fills one cell of the whole table

        def first(claims: Sequence[Claim]) -> Claim | None:
            hit = next((c for c in claims if c.text not in used), None)
            if hit is not None:
                used.add(hit.text)
            return hit

        rows: list[tuple[str, list[Claim | None]]] = [
            (_row_label(aspect), [first(mine[o]) for o in options]) for aspect in plan.aspects]
        for label, cells in _shared_headings(options, mine):
            if len(rows) >= max(2, len(plan.parts)):
                break
            rows.append((label, [first(c) for c in cells]))
        if not rows:
            rows.append((" / ".join(options), [first(mine[o]) for o in options]))
        lines = [f"| {words(plan.language)['dimension']} | " + " | ".join(options) + " |",
                 "|---" * (len(options) + 1) + "|"]
        for label, cells in rows:
            shown = [_cell(cite(c)) if c is not None else "—" for c in cells]
            lines.append(f"| {escape_markdown(label).replace('|', chr(92) + '|')} | "
                         + " | ".join(shown) + " |")
        return "\n".join(lines)


def _fits(claim: Claim, focus: Sequence[str], options: Sequence[str]) -> int:
    """How well a claim fits a comparison's section: one about the section's option alone, or
    about two options or more in the section on how they differ."""
    if len(options) < 2 or not focus:
        return 0
    named = [o for o in options if names(claim.text, (o,))]
    if len(focus) == 1:
        return 2 if named == [focus[0]] else 0
    return 2 if len(named) >= 2 else 0


def _claims_by_option(plan: ResearchPlan, findings: Sequence[Finding]) -> dict[str, list[Claim]]:
    """Each option's claims, best first: those of its own sub-question, then those of the
    others (how they differ) that are about it alone."""
    part_of = {sq.index: sq.part for sq in plan.subquestions}
    out: dict[str, list[Claim]] = {o: [] for o in plan.targets}
    rest: list[Claim] = []
    for f in findings:
        index = part_of.get(f.subquestion_index)
        part = plan.parts[index] if index is not None and index < len(plan.parts) else None
        if part is not None and part.kind == "option" and part.about[0] in out:
            out[part.about[0]] += f.claims
        else:
            rest += f.claims
    for option in plan.targets:
        others = [o for o in plan.targets if o != option]
        out[option] += [c for c in rest if _about_only(c, option, others)]
    return out


def _about_only(claim: Claim, option: str, others: Sequence[str]) -> bool:
    ev = claim.evidence[0] if claim.evidence else None
    about = (lambda keys: on_subject(claim.text, ev.title if ev else "",  # noqa: E731
                                     ev.section if ev else "", keys))
    return about((option,)) and not any(about((o,)) for o in others)


def _shared_headings(options: Sequence[str], mine: dict[str, list[Claim]]
                     ) -> list[tuple[str, list[list[Claim]]]]:
    """Headings (the innermost one a quote sits under) that two options' quotes or more sit
    under, compared by their words: (the heading as a source writes it, each option's claims
    under it). A heading naming an option is that option's own title, not a shared aspect."""
    seen: dict[str, tuple[str, dict[str, list[Claim]]]] = {}
    for option in options:
        for claim in mine[option]:
            section = claim.evidence[0].section if claim.evidence else ""
            leaf = section.rsplit(" › ", 1)[-1].strip()
            key = " ".join(sorted(set(terms(leaf))))
            if not key or any(names(leaf, (o,)) for o in options):
                continue
            spelled, cells = seen.setdefault(key, (leaf, {}))
            cells.setdefault(option, []).append(claim)
    shared = [(spelled, [cells.get(o, []) for o in options])
              for spelled, cells in seen.values() if len(cells) >= 2]
    return sorted(shared, key=lambda row: -sum(bool(c) for c in row[1]))


def _row_label(aspect: str) -> str:
    return aspect[:1].upper() + aspect[1:] if aspect[:1].islower() else aspect
