"""One researcher: rounds of query → search → choose → read → condense for a single sub-question.

From the first round the researcher chooses which results to read from their titles and
snippets (the offline engine keeps the search ranking), reads at most `max_pages` pages in all,
and after each round reflects on its notes and either stops (the sub-question is answered) or
searches again, for at most `max_rounds` rounds.

The page budget counts pages read with text. A result whose page the search backend's guard
refuses before any request (not http(s), a private or metadata address literal, localhost) is
never offered to choose. A chosen page that turns out unreadable (refused at fetch or at a
redirect, too large, failed, or a duplicate of a page already read) costs an attempt, not a
page: the engine is asked again for as many of the candidates not yet tried, so the model's
choice and the offline ranking both go on down their list. Attempts are bounded at
`MAX_ATTEMPTS_PER_PAGE` x `max_pages` per sub-question; reading stops when `max_pages` pages
were read or the candidates run out. Searches that find nothing readable (no
results, none worth choosing, or only pages that cannot be read) are rewritten once per
sub-question into more specific ones, run at once as an extra round within the page budget.

The transcript it builds is the researcher's working memory: an AI turn that calls the searches
of a round with one result per call (a rewrite round's turn says which searches failed and
which replace them), then one AI turn per page read with its notes, so shrinking can drop whole
tool turns, a page at a time. Pages that cannot be read are noted in the transcript and
skipped; provider and search-service signals propagate so the caller can retry or fail.

The loop never calls a provider itself: it asks `ResearchSteps` to search one query, read one
page (fetch + condense), choose the next queries or rewrite failed ones. `DirectSteps` does
that in-line; the Prefect layer (tasks.research) runs each step that thinks as its own task
run (a search or page fetch only once it fails for a passing reason), so a fault in one provider
call is retried alone and a finished step is never paid for twice. For that
the steps must be pure functions of their inputs, which is why the loop, not a step, keeps
track of what was read.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from urllib.parse import urldefrag
from typing import Callable, Protocol, Sequence

from core.engine.base import ResearchEngine
from core.accounting.ledger import acting_as
from core.overflow.roles import (choose_with_shrink, condense_with_shrink, queries_with_shrink,
                                 rewrite_with_shrink)
from core.models import (Message, PageNotes, SearchResult, Source, SubQuestion, ToolCall,
                         Transcript)
from core.search.base import SearchBackend
from core.search.fetch_types import PageFault
from core.search.urls import normalize_url
from core.signals import Signal

log = logging.getLogger("researchflow.research")

MAX_REWRITES = 3  # searches one rewrite may add
MAX_ATTEMPTS_PER_PAGE = 2  # fetch attempts per page of the budget (unreadable pages included)
_PAGE_FRAGMENT = re.compile(r"(?:page|slide)=\d+")


class ResearchSteps(Protocol):
    def search(self, query: str, k: int) -> list[SearchResult]: ...

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]: ...

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes: ...

    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]: ...

    def rewrite(self, subquestion: SubQuestion, failed: Sequence[str],
                seen: Sequence[SearchResult]) -> list[str]: ...


def offerable(backend: SearchBackend, results: list[SearchResult]) -> list[SearchResult]:
    """`results` without those whose page the backend would refuse before any request (its
    `refuses(url)`, when it has one): they are never offered to choose, nor listed."""
    refuses = getattr(backend, "refuses", None)
    if not callable(refuses):
        return results
    kept = []
    for hit in results:
        reason = refuses(hit.url)
        if reason is None:
            kept.append(hit)
        else:
            log.info("not offering %s: %s", hit.url, reason)
    return kept


def read_page(engine: ResearchEngine, search: SearchBackend, subquestion: SubQuestion,
              hit: SearchResult) -> PageNotes:
    """Fetch one hit and condense it for the sub-question. A page that cannot be read is a
    `PageNotes` with a reason; provider and search signals propagate, and so does a
    `PageFault` (a page that may come back), so that the read can be tried again."""
    fetched = fetch_page(search, hit)
    if fetched.source is None:
        return fetched
    return condense_page(engine, subquestion, hit.url, fetched.source)


def fetch_page(search: SearchBackend, hit: SearchResult) -> PageNotes:
    """The first half of `read_page`: the page's text as a source, without notes (or why it
    cannot be read)."""
    try:
        source = search.read(hit)
    except Signal:
        raise
    except Exception as exc:  # noqa: BLE001 - a bad page must not sink the researcher
        log.warning("skipping %s: %s", hit.url, exc)
        return PageNotes(url=hit.url, reason=str(exc) or type(exc).__name__)
    if source is None:
        return PageNotes(url=hit.url, reason="no readable text")
    return PageNotes(url=hit.url, source=source)


def condense_page(engine: ResearchEngine, subquestion: SubQuestion, url: str,
                  source: Source) -> PageNotes:
    """The second half of `read_page`: a fetched page condensed for the sub-question."""
    with acting_as("condense"):
        notes = condense_with_shrink(engine.for_role("condense"), subquestion, source,
                                     log=log.info)
    return PageNotes(url=url, source=source, notes=notes)


def unavailable(fault: PageFault) -> PageNotes:
    """A page that stayed unavailable for now: noted in this run's transcript, never cached."""
    return PageNotes(url=fault.url, reason=f"unavailable for now ({fault.reason})")


def choose_pages(engine: ResearchEngine, transcript: Transcript,
                 candidates: list[SearchResult], limit: int) -> list[int]:
    with acting_as("choose"):
        return choose_with_shrink(engine.for_role("queries"), transcript, candidates, limit,
                                  log=log.info)


def rewrite_queries(engine: ResearchEngine, subquestion: SubQuestion, failed: Sequence[str],
                    seen: Sequence[SearchResult]) -> list[str]:
    with acting_as("queries"):
        return rewrite_with_shrink(engine.for_role("queries"), subquestion, failed, seen,
                                   log=log.info)


@dataclass(frozen=True)
class DirectSteps:
    """Every step called in-line (tests, benchmarks, and anything outside Prefect)."""

    engine: ResearchEngine
    backend: SearchBackend

    def search(self, query: str, k: int) -> list[SearchResult]:
        with acting_as("search"):
            return offerable(self.backend, self.backend.search(query, k=k))

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]:
        return choose_pages(self.engine, transcript, candidates, limit)

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes:
        try:
            return read_page(self.engine, self.backend, subquestion, hit)
        except PageFault as fault:  # in-line there is no retry: noted for this run only
            return unavailable(fault)

    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]:
        with acting_as("queries"):
            return queries_with_shrink(self.engine.for_role("queries"), transcript, round_index,
                                       log=log.info)

    def rewrite(self, subquestion: SubQuestion, failed: Sequence[str],
                seen: Sequence[SearchResult]) -> list[str]:
        return rewrite_queries(self.engine, subquestion, failed, seen)


def research_subquestion(steps: ResearchSteps, subquestion: SubQuestion, *, max_rounds: int = 3,
                         max_pages: int = 6, results_per_query: int = 4,
                         progress: Callable[[str], None] | None = None) -> Transcript:
    """Rounds of search → choose → read for one sub-question (see the module docstring).

    When some searches of a round find nothing readable (no results, no result worth choosing,
    or only pages that could not be read) the engine is asked, once per sub-question, for more
    specific searches, which run at once as an extra round: it counts against `max_pages`, not
    against `max_rounds`.
    """
    state = _Research(steps, Transcript(subquestion=subquestion), max_pages, results_per_query)
    transcript = state.transcript
    rewritten = False
    queries = list(subquestion.queries) or [subquestion.question]
    for round_index in range(max_rounds):
        if round_index > 0:
            queries = [q for q in steps.next_queries(transcript, round_index)
                       if q not in transcript.queries_run]
        if not queries:
            break
        searched, read, offered = state.round(queries, f"r{round_index}")
        if progress:
            progress(f"round {round_index + 1}: {len(queries)} queries, read {read} of "
                     f"{offered} new pages")
        if state.spent:
            break
        failed = [q for q, results in searched if not state.useful(results)]
        if failed and not rewritten:
            rewritten = True  # once per sub-question, whatever comes of it
            state.rewrite(failed, [r for q, results in searched if q in failed for r in results],
                          round_index, progress)
            if state.spent:
                break
    return transcript


class _Research:
    """What one researcher has done so far: the transcript, the pages offered, tried and read."""

    def __init__(self, steps: ResearchSteps, transcript: Transcript, max_pages: int,
                 k: int) -> None:
        self.steps = steps
        self.transcript = transcript
        self.max_pages = max_pages
        self.max_attempts = MAX_ATTEMPTS_PER_PAGE * max_pages
        self.k = k
        self.pages = 0  # pages read with text: what the budget counts
        self.attempts = 0  # pages tried, readable or not
        self.offered: set[str] = set()  # documents offered to choose from (read or passed over)
        self.readable: set[str] = set()  # documents read with text (by hit URL and source URL)

    @property
    def spent(self) -> bool:
        """No page can be read any more: the budget is read, or the attempts are used up."""
        return self.pages >= self.max_pages or self.attempts >= self.max_attempts

    def round(self, queries: list[str], tag: str,
              note: str = "") -> tuple[list[tuple[str, list[SearchResult]]], int, int]:
        """Search `queries`, choose among the new pages, read them, and for each chosen page
        that could not be read choose again among those not tried: (each query with its
        results, pages read, new pages offered)."""
        searched = _search_round(self.transcript, self.steps, queries, tag, self.k, note)
        hits = list({h.url: h for _, results in searched for h in results}.values())
        # Passages of one document (#p1, #p2) are one page; a page offered once (read or
        # passed over) is not offered again.
        fresh = [h for h in hits if _document(h.url) not in self.offered]
        fresh = list({_document(h.url): h for h in reversed(fresh)}.values())[::-1]
        self.offered.update(_document(h.url) for h in fresh)
        untried, read = fresh, 0
        wanted = self.max_pages - self.pages  # how many to choose: the budget, then the misses
        while untried and wanted > 0 and not self.spent:
            left = min(wanted, self.max_pages - self.pages, self.max_attempts - self.attempts)
            picked = self.steps.choose(self.transcript, untried, left)
            chosen = [untried[i] for i in dict.fromkeys(picked) if 0 <= i < len(untried)][:left]
            if not chosen:
                break
            got = _read_round(self.transcript, self.steps, chosen, tag, self.attempts)
            self.readable |= got.documents
            self.attempts += len(chosen)
            self.pages += got.pages
            read += got.pages
            wanted = len(chosen) - got.pages  # each page that could not be read is replaced
            tried = {id(h) for h in chosen}
            untried = [h for h in untried if id(h) not in tried]
        return searched, read, len(fresh)

    def useful(self, results: list[SearchResult]) -> bool:
        """Whether a search found something readable: one of its pages was read with text (in
        this round or an earlier one)."""
        return any(_document(r.url) in self.readable for r in results)

    def rewrite(self, failed: list[str], seen: list[SearchResult], round_index: int,
                progress: Callable[[str], None] | None) -> None:
        """Ask once for more specific searches than `failed` and run them as an extra round."""
        sq = self.transcript.subquestion
        seen = list({r.url: r for r in seen}.values())
        ran = {_query_key(q) for q in self.transcript.queries_run}
        queries: list[str] = []
        for q in self.steps.rewrite(sq, failed, seen):
            if q.strip() and _query_key(q) not in ran:
                ran.add(_query_key(q))
                queries.append(" ".join(q.split()))
        queries = queries[:MAX_REWRITES]
        tried = ", ".join(f'"{q}"' for q in failed)
        if not queries:
            log.info("sub-question %d: %s found nothing readable; no other searches to try",
                     sq.index, tried)
            if progress:
                progress(f"round {round_index + 1}: {len(failed)} queries found nothing "
                         "readable; no rewrite to try")
            return
        note = (f"The searches {tried} found nothing readable. More specific searches: "
                + ", ".join(f'"{q}"' for q in queries) + ".")
        log.info("sub-question %d: %s", sq.index, note)
        _, read, offered = self.round(queries, f"r{round_index}w", note)
        if progress:
            progress(f"round {round_index + 1} rewrite: {len(failed)} queries found nothing "
                     f"readable, rewritten as {len(queries)}; read {read} of {offered} new pages")


def _document(url: str) -> str:
    """The page a URL names: passages of one document (#p1, #p2) and tracking-parameter
    variants of one article are one page to offer and read; the pages of a PDF or the slides
    of a deck in the corpus (#page=3, #slide=3) are sources of their own."""
    base, fragment = urldefrag(url)
    kept = f"#{fragment}" if _PAGE_FRAGMENT.fullmatch(fragment) else ""
    return normalize_url(base) + kept


def _query_key(query: str) -> str:
    return " ".join(query.lower().split())


def _search_round(transcript: Transcript, steps: ResearchSteps, queries: list[str], tag: str,
                  k: int, note: str = "") -> list[tuple[str, list[SearchResult]]]:
    """One AI turn calling every search of the round (saying why in `note`, for a rewrite),
    then one tool result per search: each query with its results."""
    calls = tuple(ToolCall(id=f"{tag}s{i}", name="search", arguments={"query": q})
                  for i, q in enumerate(queries))
    transcript.messages.append(Message(role="assistant", content=note, tool_calls=calls))
    searched: list[tuple[str, list[SearchResult]]] = []
    for call, query in zip(calls, queries):
        results = steps.search(query, k)
        transcript.queries_run.append(query)
        searched.append((query, results))
        listing = "\n".join(f"{r.rank}. {r.title} <{r.url}> {r.snippet}" for r in results)
        transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="search",
                                           content=listing or "no results"))
    return searched


@dataclass
class _Reads:
    """What reading a batch of hits gave: pages read with text (new sources), and the documents
    that had text, duplicates included (by hit URL and source URL)."""

    pages: int = 0
    documents: set[str] = field(default_factory=set)


def _read_round(transcript: Transcript, steps: ResearchSteps, hits: list[SearchResult],
                tag: str, first: int = 0) -> _Reads:
    """Read `hits`, one AI turn each (call ids numbered from `first`). A page counts as read
    when it has text that is not already a source of the transcript: the same URL after a
    redirect or a passage, or the same text under another address (a mirror, tracking
    parameters the URL key does not know)."""
    # One AI turn per page: dropping the last AI turn (the overflow rule) then gives up one
    # page's notes, not every page of the round.
    reads = _Reads()
    for i, hit in enumerate(hits, start=first):
        call = ToolCall(id=f"{tag}f{i}", name="read", arguments={"url": hit.url})
        transcript.messages.append(Message(role="assistant", content="", tool_calls=(call,)))
        page = steps.read(transcript.subquestion, hit)
        source = page.source
        same = None if source is None else next(
            (s for s in transcript.sources if s.url == source.url
             or (source.text.strip() and s.text == source.text)), None)
        if source is not None:  # readable, even when it is a page already read
            reads.documents.update({_document(hit.url), _document(source.url)})
        if source is None:
            content = f"[not read: {hit.url}: {page.reason}]"
        elif same is not None:  # another hit, same document: no page of the budget
            content = f"[already read: {same.url}]"
        else:
            reads.pages += 1
            transcript.sources.append(source)
            content = f"Source: {source.title} <{source.url}>\n{page.notes}"
        transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                           content=content))
    return reads
