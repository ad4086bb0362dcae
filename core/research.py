"""One researcher: rounds of query → search → choose → read → condense for a single sub-question.

From the first round the researcher chooses which results to read from their titles and
snippets (the offline engine keeps the search ranking), reads at most `max_pages` pages in all,
and after each round reflects on its notes and either stops (the sub-question is answered) or
searches again, for at most `max_rounds` rounds.

The transcript it builds is the researcher's working memory: an AI turn that calls the searches
of a round with one result per call, then one AI turn per page read with its notes, so shrinking
can drop whole tool turns, a page at a time. Pages that cannot be read are noted in the
transcript and skipped; provider and search-service signals propagate so the caller can retry or
fail.

The loop never calls a provider itself: it asks `ResearchSteps` to search one query, read one
page (fetch + condense) or choose the next queries. `DirectSteps` does that in-line; the Prefect
layer (tasks.research) runs each step as its own task run, so a fault in one provider call is
retried alone and a finished step is never paid for twice. For that the steps must be pure
functions of their inputs, which is why the loop, not a step, keeps track of what was read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Protocol
from urllib.parse import urldefrag

from core.engine.base import ResearchEngine
from core.ledger import acting_as
from core.overflow.roles import choose_with_shrink, condense_with_shrink, queries_with_shrink
from core.models import Message, PageNotes, SearchResult, SubQuestion, ToolCall, Transcript
from core.search.base import SearchBackend
from core.overflow.signals import Signal

log = logging.getLogger("researchflow.research")


class ResearchSteps(Protocol):
    def search(self, query: str, k: int) -> list[SearchResult]: ...

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]: ...

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes: ...

    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]: ...


def read_page(engine: ResearchEngine, search: SearchBackend, subquestion: SubQuestion,
              hit: SearchResult) -> PageNotes:
    """Fetch one hit and condense it for the sub-question. A page that cannot be read is a
    `PageNotes` with a reason; provider and search signals propagate."""
    try:
        source = search.read(hit)
    except Signal:
        raise
    except Exception as exc:  # noqa: BLE001 - a bad page must not sink the researcher
        log.warning("skipping %s: %s", hit.url, exc)
        return PageNotes(url=hit.url, reason=str(exc) or type(exc).__name__)
    if source is None:
        return PageNotes(url=hit.url, reason="no readable text")
    with acting_as("condense"):
        notes = condense_with_shrink(engine.for_role("condense"), subquestion, source,
                                     log=log.info)
    return PageNotes(url=hit.url, source=source, notes=notes)


def choose_pages(engine: ResearchEngine, transcript: Transcript,
                 candidates: list[SearchResult], limit: int) -> list[int]:
    with acting_as("choose"):
        return choose_with_shrink(engine.for_role("queries"), transcript, candidates, limit,
                                  log=log.info)


@dataclass(frozen=True)
class DirectSteps:
    """Every step called in-line (tests, benchmarks, and anything outside Prefect)."""

    engine: ResearchEngine
    backend: SearchBackend

    def search(self, query: str, k: int) -> list[SearchResult]:
        with acting_as("search"):
            return self.backend.search(query, k=k)

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]:
        return choose_pages(self.engine, transcript, candidates, limit)

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes:
        return read_page(self.engine, self.backend, subquestion, hit)

    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]:
        with acting_as("queries"):
            return queries_with_shrink(self.engine.for_role("queries"), transcript, round_index,
                                       log=log.info)


def research_subquestion(steps: ResearchSteps, subquestion: SubQuestion, *, max_rounds: int = 3,
                         max_pages: int = 6, results_per_query: int = 4,
                         progress: Callable[[str], None] | None = None) -> Transcript:
    transcript = Transcript(subquestion=subquestion)
    offered: set[str] = set()
    pages = 0
    queries = list(subquestion.queries) or [subquestion.question]
    for round_index in range(max_rounds):
        if round_index > 0:
            queries = [q for q in steps.next_queries(transcript, round_index)
                       if q not in transcript.queries_run]
        if not queries:
            break
        hits = _search_round(transcript, steps, queries, round_index, results_per_query)
        # Passages of one document (#p1, #p2) are one page; a page offered once (read or
        # passed over) is not offered again.
        fresh = [h for h in hits if _document(h.url) not in offered]
        fresh = list({_document(h.url): h for h in reversed(fresh)}.values())[::-1]
        offered.update(_document(h.url) for h in fresh)
        picked = steps.choose(transcript, fresh, max_pages - pages) if fresh else []
        chosen = [fresh[i] for i in dict.fromkeys(picked) if 0 <= i < len(fresh)]
        chosen = chosen[:max_pages - pages]
        _read_round(transcript, steps, chosen, round_index)
        pages += len(chosen)
        if progress:
            progress(f"round {round_index + 1}: {len(queries)} queries, read {len(chosen)} of "
                     f"{len(fresh)} new pages")
        if pages >= max_pages:
            break
    return transcript


def _document(url: str) -> str:
    return urldefrag(url)[0]


def _search_round(transcript: Transcript, steps: ResearchSteps, queries: list[str],
                  round_index: int, k: int) -> list[SearchResult]:
    calls = tuple(ToolCall(id=f"r{round_index}s{i}", name="search", arguments={"query": q})
                  for i, q in enumerate(queries))
    transcript.messages.append(Message(role="assistant", content="", tool_calls=calls))
    hits: list[SearchResult] = []
    for call, query in zip(calls, queries):
        results = steps.search(query, k)
        transcript.queries_run.append(query)
        hits.extend(results)
        listing = "\n".join(f"{r.rank}. {r.title} <{r.url}> {r.snippet}" for r in results)
        transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="search",
                                           content=listing or "no results"))
    return list({h.url: h for h in hits}.values())


def _read_round(transcript: Transcript, steps: ResearchSteps, hits: list[SearchResult],
                round_index: int) -> None:
    # One AI turn per page: dropping the last AI turn (the overflow rule) then gives up one
    # page's notes, not every page of the round.
    for i, hit in enumerate(hits):
        call = ToolCall(id=f"r{round_index}f{i}", name="read", arguments={"url": hit.url})
        transcript.messages.append(Message(role="assistant", content="", tool_calls=(call,)))
        page = steps.read(transcript.subquestion, hit)
        source = page.source
        if source is None:
            content = f"[not read: {hit.url}: {page.reason}]"
        elif any(s.url == source.url for s in transcript.sources):  # another hit, same document
            content = f"[already read: {source.url}]"
        else:
            transcript.sources.append(source)
            content = f"Source: {source.title} <{source.url}>\n{page.notes}"
        transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                           content=content))
