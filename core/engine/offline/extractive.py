"""The offline extractive engine: every role, with no network and no model weights.

It plans with core.engine.offline.outline (sections drawn from what the corpus holds), picks the sentences of what was read that answer each
sub-question (core.engine.offline.selection: words and meaning, on the subject, near-duplicates once),
quotes them verbatim as evidence, and assembles the report from those quotes, with a summary
chosen for coverage of the sections (core.engine.offline.summary). Meaning comes from the shared offline
embedder (core.embedding), the only "model" here: 16 MB of word vectors, no generation.
Deterministic: the same corpus and topic give the same report. Its reports say plainly that they
are extractive, not model-written prose.
"""

from __future__ import annotations

from typing import Sequence

from core.text.embedding import Embedder
from core.models import ReportDraft, SectionDraft
from core.engine.offline.outline import Search, draft_plan
from core.engine.offline.words import words
from core.engine.offline.selection import corroborated, naming, pick, rank
from core.engine.offline.summary import summarize
from core.engine.sentences import query_words, terms
from core.models import (Claim, Evidence, Finding, FollowUp, ResearchPlan, SearchResult,
                         Source, SubQuestion, Topic, Transcript)
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
                 search: Search | None = None) -> None:
        self.claims_per_section = claims_per_section
        self.claims_per_finding = claims_per_finding
        self.notes_per_source = notes_per_source
        self._embedder = embedder  # None: the process's shared one, loaded on first use
        self._search = search  # the corpus the outline is drawn from; None: the topic's parts

    def for_role(self, role: str) -> "ExtractiveEngine":
        return self

    def context_window(self) -> int | None:
        return None  # no model: nothing to fit

    # -- plan ---------------------------------------------------------------------------------
    def plan(self, topic: Topic, *, max_tokens: int | None = None) -> ResearchPlan:
        return draft_plan(topic, self._search, self._embedder)

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
        searched together, as written (the plan's queries searched subject and aspect apart)."""
        supported = {f.subquestion_index for f in findings if f.support}
        asked = {q for sq in plan.subquestions for q in sq.queries}
        out: list[FollowUp] = []
        for sq in plan.sections:
            covered = sq.index in supported or any(
                f.parent == sq.index and f.index in supported for f in plan.subquestions)
            if covered:
                continue
            # Subject and aspect together, in one search: the plan's queries split them.
            words = query_words(sq.question)
            query = " ".join(words[:5])
            if not query or query in asked:
                continue
            asked.add(query)  # sections sharing a subject get one follow-up, not one each
            out.append(FollowUp(question=f"What do the sources say about {query}?",
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
                                           quote=c.sentence.text),),
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

        used: set[str] = set()
        sections, shown = [], []
        for f in findings:
            # Researchers run independently, and a model may repeat itself: say a sentence once.
            fresh = []
            for c in f.claims:
                if c.text not in used and len(fresh) < self.claims_per_section:
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
        targets = plan.targets
        rows = [f"| {words(plan.language)['dimension']} | " + " | ".join(targets) + " |",
                "|---" * (len(targets) + 1) + "|"]
        target_terms = [set(terms(t)) for t in targets]
        used: set[str] = set()  # a sentence fills one cell of the whole table, not one per row
        for f in findings:
            cells = []
            for mine in target_terms:
                others = [t for t in target_terms if t is not mine]
                hit = _about_option([c for c in f.claims if c.text not in used], mine, others)
                if hit is not None:
                    used.add(hit.text)
                cells.append(_cell(cite(hit)) if hit else "—")
            dim = escape_markdown(f.subquestion).replace("|", "\\|")
            rows.append(f"| {dim} | " + " | ".join(cells) + " |")
        return "\n".join(rows)


def _about_option(claims: Sequence[Claim], mine: set[str],
                  others: Sequence[set[str]]) -> Claim | None:
    """The claim for an option's cell: one naming this option alone, else one naming it, else
    one quoted from a page whose title names it and no other option (an API reference such as
    "multiprocessing" rarely repeats its own name in its sentences)."""
    rivals = set().union(*others)
    named = [c for c in claims if mine & set(terms(c.text))]
    alone = next((c for c in named if not rivals & set(terms(c.text))), None)
    return alone or (named[0] if named else None) or next(
        (c for c in claims if _titled(c, mine) and not any(_titled(c, o) for o in others)), None)


def _titled(claim: Claim, option: set[str]) -> bool:
    """A claim quoted from a page whose title names the option ("multiprocessing.pool")."""
    return any(naming([sorted(option)], terms(e.title)) >= 1.0 for e in claim.evidence)
