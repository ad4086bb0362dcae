"""The page budget counts pages read: the researcher's loop goes on down the candidates when a
chosen page cannot be read, within twice `max_pages` attempts, and a result the guard refuses
before any request is never offered to choose (core.researcher, core.search.guard)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest

from core.models import PageNotes, SearchResult, Source, SubQuestion, Transcript
from core.researcher import DirectSteps, offerable, research_subquestion
from core.search.addresses import AllowList
from core.search.guard import refused_unasked
from core.search.serpapi import SerpApiSearch

SQ = SubQuestion(index=0, question="How do threads wait on sockets?", queries=("q1",))


@dataclass
class Steps:
    """`ResearchSteps` over one listing: some pages unreadable, some the same text as another;
    `pick` plays the engine's choice (default: the ranking, as the offline engine does)."""

    results: dict[str, list[str]]
    unreadable: set[str] = field(default_factory=set)
    same_text: dict[str, str] = field(default_factory=dict)  # url -> url whose text it carries
    pick: Callable[[list[SearchResult], int], list[int]] = (
        lambda candidates, limit: list(range(min(limit, len(candidates)))))
    later: list[list[str]] = field(default_factory=list)
    offered: list[tuple[list[str], int]] = field(default_factory=list)  # (candidates, limit)
    reads: list[str] = field(default_factory=list)

    def search(self, query: str, k: int) -> list[SearchResult]:
        return [SearchResult(url=u, title=u, rank=i + 1)
                for i, u in enumerate(self.results.get(query, [])[:k])]

    def choose(self, transcript: Transcript, candidates: list[SearchResult],
               limit: int) -> list[int]:
        self.offered.append(([c.url for c in candidates], limit))
        return self.pick(candidates, limit)

    def read(self, subquestion: SubQuestion, hit: SearchResult) -> PageNotes:
        self.reads.append(hit.url)
        if hit.url in self.unreadable:
            return PageNotes(url=hit.url, reason="too large")
        text = f"Text of {self.same_text.get(hit.url, hit.url)}."
        return PageNotes(url=hit.url, notes="notes",
                         source=Source(url=hit.url, title=hit.url, text=text))

    def next_queries(self, transcript: Transcript, round_index: int) -> list[str]:
        return self.later.pop(0) if self.later else []

    def rewrite(self, subquestion, failed, seen) -> list[str]:
        return []


def test_unreadable_chosen_pages_are_replaced_by_the_next_candidates() -> None:
    steps = Steps({"q1": list("abcdefghij")}, unreadable={"b", "c", "f"})
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=4, results_per_query=10)

    assert steps.reads == list("abcdefg")  # b, c and f cost attempts, not pages
    assert [s.url for s in t.sources] == ["a", "d", "e", "g"]
    # Chosen again among the candidates not tried, as many as could not be read.
    assert steps.offered == [(list("abcdefghij"), 4), (list("efghij"), 2), (list("ghij"), 1)]


def test_a_duplicate_of_a_page_already_read_does_not_use_up_the_budget() -> None:
    steps = Steps({"q1": ["a", "mirror-of-a", "b", "c"]}, same_text={"mirror-of-a": "a"})
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=3)

    assert steps.reads == ["a", "mirror-of-a", "b", "c"]
    assert [s.url for s in t.sources] == ["a", "b", "c"]
    assert any(m.content == "[already read: a]" for m in t.messages if m.role == "tool")


def test_attempts_stop_at_twice_the_page_budget() -> None:
    urls = [f"u{i}" for i in range(20)]
    steps = Steps({"q1": urls}, unreadable=set(urls[:15]))
    t = research_subquestion(steps, SQ, max_rounds=3, max_pages=3, results_per_query=20)

    assert steps.reads == urls[:6] and t.sources == []


def test_the_attempt_bound_holds_across_rounds() -> None:
    steps = Steps({"q1": ["a", "x1", "x2"], "q2": ["x3", "b", "x4", "c", "d"]},
                  unreadable={"x1", "x2", "x3", "x4"}, later=[["q2"]])
    t = research_subquestion(steps, SQ, max_rounds=2, max_pages=3, results_per_query=5)

    # Round 1: a read, x1 and x2 not (3 attempts); round 2: x3, b, x4 (6 attempts: the bound).
    assert steps.reads == ["a", "x1", "x2", "x3", "b", "x4"]
    assert [s.url for s in t.sources] == ["a", "b"]


def test_the_models_choice_is_asked_again_for_the_pages_it_lost() -> None:
    # The model reads what it picks by name; a page it lost is replaced by its next choice among
    # the pages not tried, and a model that wants nothing more stops the round.
    wishes = iter([["c", "a"], ["e"], []])

    def by_name(candidates: list[SearchResult], limit: int) -> list[int]:
        names = [c.url for c in candidates]
        return [names.index(n) for n in next(wishes) if n in names]

    steps = Steps({"q1": list("abcdef")}, unreadable={"a", "e"}, pick=by_name)
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=6, results_per_query=6)

    assert steps.reads == ["c", "a", "e"]
    assert [s.url for s in t.sources] == ["c"]
    assert steps.offered == [(list("abcdef"), 6), (list("bdef"), 1), (list("bdf"), 1)]


def test_pages_the_model_passed_over_are_not_chosen_when_all_it_chose_was_read() -> None:
    steps = Steps({"q1": list("abcdef")}, pick=lambda candidates, limit: [1])
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=6, results_per_query=6)

    assert steps.reads == ["b"] and len(steps.offered) == 1 and len(t.sources) == 1


def test_call_ids_stay_unique_when_a_round_chooses_again() -> None:
    steps = Steps({"q1": list("abcd")}, unreadable={"a", "b"})
    t = research_subquestion(steps, SQ, max_rounds=1, max_pages=2)

    ids = [c.id for m in t.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 5  # one search, four reads


# -- results refused before any request are not offered ---------------------------------------

ALLOW = AllowList.parse("127.0.0.1:8080")


@pytest.mark.parametrize("url, reason", [
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://10.0.0.7/admin", "private address"),
    ("http://127.0.0.2:8080/secret", "loopback address"),
    ("http://2130706433:9090/", "loopback address"),  # 127.0.0.1 as a number, other port
    ("http://[::1]/", "loopback address"),
    ("http://localhost:8080/", "localhost"),
    ("http://api.localhost/", "localhost"),
    ("file:///etc/passwd", "unsupported URL scheme (file)"),
    ("javascript:alert(1)", "unsupported URL scheme (javascript)"),
    ("http:///no-host", "no host"),
])
def test_refused_unasked_names_what_needs_no_request(url: str, reason: str) -> None:
    got = refused_unasked(url, ALLOW)
    assert got is not None and reason in got


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/article", "https://example.com/a",
                                 "http://internal.example/wiki"])  # a name: only DNS can tell
def test_refused_unasked_lets_through_what_only_a_request_can_judge(url: str) -> None:
    assert refused_unasked(url, ALLOW) is None


class ListedSearch:
    """A backend listing fixed URLs; its fetcher is the search client's default."""

    name = "listed"

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.client = SerpApiSearch("key")  # only its `refuses` is used: no call is made

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        return [SearchResult(url=u, title=u, rank=i + 1) for i, u in enumerate(self.urls)]

    def read(self, result: SearchResult) -> Source | None:
        return Source(url=result.url, title=result.url, text=f"Text of {result.url}.")

    def refuses(self, url: str) -> str | None:
        return self.client.refuses(url)


def test_results_the_guard_refuses_unasked_are_never_offered_nor_listed() -> None:
    backend = ListedSearch(["http://169.254.169.254/latest/", "https://example.com/a",
                            "file:///etc/passwd", "http://localhost/x", "https://example.org/b"])
    assert [r.url for r in offerable(backend, backend.search("q"))] == [
        "https://example.com/a", "https://example.org/b"]

    from core.engine.offline.extractive import ExtractiveEngine

    t = research_subquestion(DirectSteps(ExtractiveEngine(), backend), SQ, max_rounds=1,
                             max_pages=6, results_per_query=5)
    assert [s.url for s in t.sources] == ["https://example.com/a", "https://example.org/b"]
    listing = next(m.content for m in t.messages if m.role == "tool" and m.name == "search")
    assert "169.254" not in listing and "file:" not in listing and "localhost" not in listing


def test_a_backend_without_a_guard_is_offered_everything() -> None:
    results = [SearchResult(url="corpus://a.md", title="a", rank=1)]
    assert offerable(object(), results) == results  # type: ignore[arg-type]


def test_a_web_backend_screens_with_its_fetchers_allow_list() -> None:
    from core.search.cache import CachedFetcher
    from core.search.web import Fetcher, FetchPolicy

    with Fetcher(FetchPolicy(allow=AllowList.parse("127.0.0.1:8080"))) as fetcher:
        search = SerpApiSearch("key", fetcher=CachedFetcher(fetcher, None, ttl_hours=0))
        assert search.refuses("http://127.0.0.1:8080/article") is None  # allow-listed
        assert "loopback" in (search.refuses("http://127.0.0.1:9090/") or "")
        assert "cloud metadata" in (search.refuses("http://169.254.169.254/") or "")
    # A fetcher of its own rules (a test's, a corpus reader) is not second-guessed.
    assert SerpApiSearch("key", fetcher=lambda url: None).refuses("http://10.0.0.1/") is None
