"""One researcher: rounds of query → search → read → condense for a single sub-question.

The transcript it builds is the researcher's working memory: an AI turn that calls the searches
of a round with one result per call, then one AI turn per page read with its notes, so shrinking
can drop whole tool turns, a page at a time. Pages that cannot be
read are noted in the transcript and skipped; provider and search-service signals propagate so
the task around this can retry or fail.
"""

from __future__ import annotations

import logging
from typing import Callable

from core.engine.base import ResearchEngine
from core.models import Message, SearchResult, SubQuestion, ToolCall, Transcript
from core.search.base import SearchBackend
from core.signals import Signal

log = logging.getLogger("researchflow.research")


def research_subquestion(engine: ResearchEngine, search: SearchBackend, subquestion: SubQuestion,
                         *, max_rounds: int = 2, results_per_query: int = 4,
                         progress: Callable[[str], None] | None = None) -> Transcript:
    transcript = Transcript(subquestion=subquestion)
    seen_urls: set[str] = set()
    queries = list(subquestion.queries) or [subquestion.question]
    for round_index in range(max_rounds):
        if round_index > 0:
            queries = [q for q in engine.next_queries(transcript, round_index)
                       if q not in transcript.queries_run]
        if not queries:
            break
        hits = _search_round(transcript, search, queries, round_index, results_per_query)
        fresh = [h for h in hits if h.url not in seen_urls]
        seen_urls.update(h.url for h in fresh)
        _read_round(transcript, engine, search, fresh, round_index)
        if progress:
            progress(f"round {round_index + 1}: {len(queries)} queries, {len(fresh)} new pages")
    return transcript


def _search_round(transcript: Transcript, search: SearchBackend, queries: list[str],
                  round_index: int, k: int) -> list[SearchResult]:
    calls = tuple(ToolCall(id=f"r{round_index}s{i}", name="search", arguments={"query": q})
                  for i, q in enumerate(queries))
    transcript.messages.append(Message(role="assistant", content="", tool_calls=calls))
    hits: list[SearchResult] = []
    for call, query in zip(calls, queries):
        results = search.search(query, k=k)
        transcript.queries_run.append(query)
        hits.extend(results)
        listing = "\n".join(f"{r.rank}. {r.title} <{r.url}> {r.snippet}" for r in results)
        transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="search",
                                           content=listing or "no results"))
    return list({h.url: h for h in hits}.values())


def _read_round(transcript: Transcript, engine: ResearchEngine, search: SearchBackend,
                hits: list[SearchResult], round_index: int) -> None:
    # One AI turn per page: dropping the last AI turn (the overflow rule) then gives up one
    # page's notes, not every page of the round.
    for i, hit in enumerate(hits):
        call = ToolCall(id=f"r{round_index}f{i}", name="read", arguments={"url": hit.url})
        transcript.messages.append(Message(role="assistant", content="", tool_calls=(call,)))
        try:
            source = search.read(hit)
        except Signal:
            raise
        except Exception as exc:  # noqa: BLE001 - a bad page must not sink the researcher
            log.warning("skipping %s: %s", hit.url, exc)
            source = None
            reason = str(exc) or type(exc).__name__
        else:
            reason = "no readable text"
        if source is None:
            transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                               content=f"[not read: {hit.url}: {reason}]"))
            continue
        if any(s.url == source.url for s in transcript.sources):  # another hit, same document
            transcript.messages.append(Message(role="tool", tool_call_id=call.id, name="read",
                                               content=f"[already read: {source.url}]"))
            continue
        transcript.sources.append(source)
        notes = engine.condense(transcript.subquestion, source)
        transcript.messages.append(Message(
            role="tool", tool_call_id=call.id, name="read",
            content=f"Source: {source.title} <{source.url}>\n{notes}"))
