"""Sentence selection of the offline engine (core/engine/offline/selection.py): relevance by words and
meaning, the subject gate, near-duplicates, Chinese, determinism.

Every text here is written for the test. The real embedder (wordllama, offline) runs: a test that
mocked it would only check the mock.
"""

from __future__ import annotations

import numpy as np

from core.engine.offline.extractive import ExtractiveEngine
from core.engine.offline.selection import Candidate, pick, rank
from core.relevance.about import naming
from core.engine.sentences import Scorer, Sentence, sentences, terms
from core.models import Source, SubQuestion, Transcript

PUMPS = Source(url="https://heat.example/pumps", title="Heat pumps for homes", text=(
    "A heat pump moves warmth from the outdoor air into the house instead of burning fuel. "
    "Heat pumps keep working in freezing air, although they deliver less warmth for each unit "
    "of electricity. "
    "Modern heat pumps with vapour injection still heat a house at minus twenty degrees. "
    "Cold weather performance of the regional grid depends on weather forecasts and cold "
    "reserve capacity. "
    "A string kept for identification and performance tracking purposes only."))
BOILERS = Source(url="https://heat.example/boilers", title="Gas boilers", text=(
    "Gas boilers perform well in cold weather because burning gas gives the same heat at any "
    "outdoor temperature. "
    "A condensing boiler recovers heat from its exhaust and reaches high efficiency."))
COLD = SubQuestion(index=0, question="How do heat pumps perform in cold weather?",
                   queries=("heat pumps cold weather performance",), focus=("heat pumps",))

OFF_SUBJECT = ("regional grid", "identification", "Gas boilers", "condensing boiler")


def test_the_aspect_words_alone_would_pick_off_subject_sentences() -> None:
    # The premise of the next test: by word overlap alone, the grid sentence (on a page whose
    # title names heat pumps) and the boiler sentence beat every sentence about heat pumps.
    pool = [s.text for src in (PUMPS, BOILERS) for s in sentences(src.text)]
    scorer = Scorer(pool)
    query = terms(COLD.question + " " + " ".join(COLD.queries))
    best = sorted(pool, key=lambda t: -scorer.score(pool.index(t), query))[:2]
    assert any("regional grid" in t for t in best) and any("Gas boilers" in t for t in best)


def test_sentences_about_the_subject_beat_ones_sharing_only_aspect_words() -> None:
    finding = ExtractiveEngine().compress(Transcript(subquestion=COLD, sources=[PUMPS, BOILERS]))
    quotes = [c.evidence[0].quote for c in finding.claims]
    assert len(quotes) == 3
    assert all("heat pump" in q.lower() for q in quotes)
    assert not any(word in q for q in quotes for word in OFF_SUBJECT)


def test_a_page_title_does_not_carry_a_fragment_that_is_far_from_the_subject() -> None:
    ranked = rank(COLD, [PUMPS])
    assert ranked and not any("identification" in c.sentence.text for c in ranked)


def test_a_sentence_naming_only_a_common_part_of_the_subject_is_not_about_it() -> None:
    """The subject of "How does sourdough fermentation work?" is its rarest word; "Kombucha
    fermentation" names the common half of it and is about something else."""
    bread = Source(url="https://bake.example/sour", title="Baking notes", text=(
        "A sourdough starter is a culture of wild yeast and lactic acid bacteria kept in flour. "
        "Warm kitchens speed up sourdough fermentation, while a fridge slows it for days."))
    tea = Source(url="https://brew.example/tea", title="Brewing notes", text=(
        "Kombucha fermentation works through a floating culture of bacteria and yeast on sweet "
        "tea. Ale fermentation works best between eighteen and twenty-two degrees Celsius."))
    sq = SubQuestion(index=1, question="How does sourdough fermentation work?",
                     queries=("sourdough fermentation",), focus=("sourdough",))
    texts = [c.sentence.text for c in rank(sq, [bread, tea])]
    assert any(t.startswith("A sourdough starter") for t in texts)
    assert not any("Kombucha" in t or "Ale " in t for t in texts)


def test_naming_needs_every_word_of_a_short_phrase_and_most_of_a_long_one() -> None:
    assert naming([terms("heat pumps")], terms("A heat pump works in frost.")) == 1.0
    assert naming([terms("heat pumps")], terms("Gas gives heat.")) == 0.5
    assert naming([terms("threading")], terms("Threads share memory.")) == 1.0
    assert naming([terms("cancel")], terms("Cancellation is cooperative.")) == 1.0
    # Five shared letters are not a shared word.
    assert naming([terms("multiprocessing")], terms("Use multiples of 4096.")) == 0.0
    long = terms("锂离子电池容量衰减")  # 8 bigrams: 6 named is past two thirds
    assert naming([long], terms("锂离子电池的容量会衰减")) == 1.0
    assert naming([long], terms("铅酸电池容量衰减")) < 1.0  # 电池 and 容量衰减 only: not lithium


def test_near_duplicates_across_pages_are_quoted_once_and_corroborate() -> None:
    a = Source(url="https://a.example/gc", title="Collector", text=(
        "The cycle collector finds groups of objects that only refer to each other. "
        "Reference counting frees most objects as soon as their last reference goes away."))
    b = Source(url="https://b.example/gc", title="Memory", text=(
        "Reference counting frees most objects as soon as the last reference to them goes "
        "away!"))
    sq = SubQuestion(index=0, question="How does reference counting free objects?",
                     focus=("reference counting",))
    finding = ExtractiveEngine().compress(Transcript(subquestion=sq, sources=[a, b]))
    freeing = [c for c in finding.claims if "frees most objects" in c.text]
    assert len(freeing) == 1 and freeing[0].confidence == "high"


def _candidate(text: str, vector: list[float], score: float, url: str = "u") -> Candidate:
    v = np.asarray(vector, dtype=np.float32)
    return Candidate(score, Sentence(text, 0, len(text)), Source(url=url, title="t", text=text),
                     v / np.linalg.norm(v))


def test_pick_drops_a_near_duplicate_in_meaning_even_without_shared_words() -> None:
    ranked = [_candidate("Lorries carry freight across the border daily.", [1, 0, 0], 0.9),
              _candidate("Trucks haul cargo over the frontier every day.", [0.99, 0.05, 0], 0.8),
              _candidate("Ferries cross the strait twice an hour.", [0, 1, 0], 0.7)]
    assert [c.sentence.text[:6] for c in pick(ranked, 3)] == ["Lorrie", "Ferrie"]


def test_nothing_about_the_question_gives_nothing() -> None:
    sq = SubQuestion(index=0, question="How do volcanoes form magma chambers?",
                     focus=("volcanoes",))
    assert rank(sq, [PUMPS, BOILERS]) == []


BATTERY = Source(url="https://zh.example/li", title="锂离子电池的老化", text=(
    "容量衰减的机制\n"
    "锂离子电池在循环过程中，负极表面的界面膜不断增厚，持续消耗可用的活性锂。"
    "活性锂的损失是锂离子电池容量衰减最主要的原因之一；"
    "高温会加速电解液分解，因此锂离子电池在高温下存放时容量衰减更快！"
    "快速充电时锂离子电池的负极可能析锂，金属锂沉积会造成不可逆的容量损失。"
    "点击这里订阅我们的每周新闻简报。"))
LEAD = Source(url="https://zh.example/lead", title="铅酸电池的维护", text=(
    "铅酸电池容量衰减的主要机制是极板硫酸盐化。"
    "铅酸电池长期亏电存放会导致硫酸铅结晶变硬，容量难以恢复。"))
FADE = SubQuestion(index=0, question="锂离子电池容量衰减的主要机制是什么？",
                   queries=("锂离子电池 容量衰减",), focus=("锂离子电池",), language="zh")


def test_chinese_sentences_are_chosen_verbatim_and_on_subject() -> None:
    finding = ExtractiveEngine().compress(Transcript(subquestion=FADE, sources=[BATTERY, LEAD]))
    quotes = [c.evidence[0].quote for c in finding.claims]
    assert len(quotes) >= 4
    assert all(q in BATTERY.text for q in quotes)  # verbatim, from the lithium page
    assert not any("铅酸" in q or "订阅" in q for q in quotes)
    assert not any(q.startswith("容量衰减的机制") for q in quotes)  # the heading is not glued on


def test_a_page_title_repeated_as_its_heading_is_not_quoted() -> None:
    page = Source(url="https://zh.example/q", title="锂离子电池为什么会老化？", text=(
        "锂离子电池为什么会老化？\n\n"
        "锂离子电池在循环过程中，负极表面的界面膜不断增厚，持续消耗可用的活性锂。"))
    quotes = [c.sentence.text for c in rank(FADE, [page])]
    assert quotes == ["锂离子电池在循环过程中，负极表面的界面膜不断增厚，持续消耗可用的活性锂。"]


def test_rank_is_deterministic() -> None:
    def keys() -> list[tuple[str, int, float]]:
        return [(c.source.url, c.sentence.start, round(c.score, 9))
                for c in rank(FADE, [LEAD, BATTERY])]
    assert keys() == keys()


def test_a_comparison_quotes_every_option_even_when_one_has_the_most_pages() -> None:
    lines = ("Trams offer a high capacity on their routes, with long coupled cars at rush hour.",
             "The capacity of a tram route grows when the city adds a second coupled car.",
             "Tram routes are fixed by their rails, so changing a route takes years of work.",
             "A modern tram carries two hundred riders, a capacity few vehicles on a route match.")
    trams = [Source(url=f"https://city.example/trams{i}", title="Trams", text=t)
             for i, t in enumerate(lines)]
    buses = Source(url="https://city.example/buses", title="Buses", text=(
        "Buses are cheap to put on a new street, since the roads are already there."))
    sq = SubQuestion(index=0, question="How do trams and buses differ in capacity and routes?",
                     queries=("trams capacity routes", "buses capacity routes"),
                     focus=("trams", "buses"))
    ranked = rank(sq, [*trams, buses])
    assert not any("Buses" in c.sentence.text for c in ranked[:3])  # by score, trams only
    claims = ExtractiveEngine(claims_per_finding=3).compress(
        Transcript(subquestion=sq, sources=[*trams, buses])).claims
    assert len(claims) == 3
    assert any(c.text.startswith("Buses") for c in claims)  # the one page about buses speaks


def _sky(name: str, title: str, text: str) -> Source:
    return Source(url=f"https://sky.example/{name}", title=title, text=text)


PLANETS = [
    _sky("mercury-orbit", "Mercury: orbit and surface", (
        "Mercury is the planet closest to the Sun and circles it every eighty-eight days. "
        "The surface of Mercury swings from over four hundred degrees by day to minus one "
        "hundred and seventy at night. Mercury has almost no atmosphere to hold the heat of its "
        "rocky surface.")),
    _sky("mercury-heat", "Mercury: day and night", (
        "A day on Mercury lasts longer than its year, so the Sun heats one side of the planet "
        "for months. Without an atmosphere, the surface of Mercury loses its heat to space as "
        "soon as the Sun sets.")),
    _sky("venus-air", "Venus: atmosphere and heat", (
        "Venus has a thick carbon dioxide atmosphere that traps heat in a runaway greenhouse "
        "effect. The surface of Venus stays near four hundred and sixty degrees, hotter than any "
        "other planet. Clouds of sulphuric acid hide the surface of Venus from telescopes.")),
    _sky("venus-orbit", "Venus: rotation and orbit", (
        "Venus turns on its axis more slowly than it orbits the Sun, so a day on the planet is "
        "longer than its year. The dense atmosphere of Venus spreads the heat so evenly that "
        "its night side is as hot as its day side.")),
]
# Names a planet and shares the question's words, but means the singer.
SINGER = _sky("freddie", "Freddie Mercury on stage", (
    "Freddie Mercury sang with a range that made every stadium performance feel like a surface "
    "of pure heat. Fans remember how Mercury held the crowd at Live Aid in nineteen eighty-five. "
    "Mercury wrote many of the band's best known songs on the piano."))
SURFACE = SubQuestion(index=0, question="How do Mercury and Venus differ in surface heat?",
                      queries=("Mercury surface heat", "Venus surface heat"),
                      focus=("Mercury", "Venus"))


def test_a_page_naming_the_subject_in_another_sense_is_left_out(monkeypatch) -> None:
    import core.engine.offline.selection as selection

    assert selection.stray_pages(SURFACE.focus, [*PLANETS, SINGER]) == {SINGER.url}
    assert selection.stray_pages(SURFACE.focus, PLANETS) == set()  # one sense: nobody strays
    assert not any(c.source is SINGER for c in rank(SURFACE, [*PLANETS, SINGER]))
    # The premise: by naming alone, the singer's page would be quoted.
    monkeypatch.setattr(selection, "stray_pages", lambda *a, **k: set())
    assert any(c.source is SINGER for c in rank(SURFACE, [*PLANETS, SINGER]))


def test_two_pages_are_no_consensus_on_a_sense() -> None:
    from core.engine.offline.selection import stray_pages

    assert stray_pages(SURFACE.focus, [PLANETS[0], SINGER]) == set()


def test_options_compared_in_one_respect_are_quoted_only_where_it_is_named() -> None:
    # No sentence names an option and JSON together: one naming half of "PostgreSQL JSON" must
    # name the respect compared (JSON), not just the option, however close it is in meaning.
    sqlite = Source(url="https://db.example/sqlite", title="SQLite notes", text=(
        "JSON documents are kept as plain text and parsed again on every query that reads them. "
        "SQLite stores each document in an ordinary table row inside one file on disk. "
        "SQLite locks that file while a transaction writes, so writers wait for each other."))
    postgres = Source(url="https://db.example/pg", title="PostgreSQL notes", text=(
        "A binary JSON column can be indexed, so a query finds documents by a key quickly. "
        "PostgreSQL stores large documents in separate tables outside the main row. "
        "PostgreSQL runs a server process for every client connection it accepts."))
    asked = dict(index=0, question="How do SQLite and PostgreSQL differ in storing JSON "
                                   "documents?",
                 queries=("SQLite json documents", "PostgreSQL json documents"))
    json = SubQuestion(**asked, focus=("SQLite JSON", "PostgreSQL JSON"))
    options = SubQuestion(**asked, focus=("SQLite", "PostgreSQL"))
    # The premise: about the options alone, these sentences are answers.
    assert any("JSON" not in c.sentence.text for c in rank(options, [sqlite, postgres]))
    assert not any("JSON" not in c.sentence.text for c in rank(json, [sqlite, postgres]))


def test_the_page_titled_as_asked_leads_over_the_page_of_its_key() -> None:
    """"Database Access from PL/Tcl" is keyed by PL/Tcl, whose chapter page opens with the key;
    the page titled with the whole subject as asked is where the answer is (PostgreSQL's report
    quoted only the chapter and its settings)."""
    chapter = Source(url="file:///pg/pltcl.html", title="Chapter 44. PL/Tcl — Tcl Procedural "
                     "Language", text=(
                         "PL/Tcl is a loadable procedural language for the PostgreSQL database "
                         "system that enables the Tcl language to be used to write functions. "
                         "PL/Tcl provides a trusted and an untrusted variant of the language."))
    access = Source(url="file:///pg/pltcl-dbaccess.html", title="44.5. Database Access from "
                    "PL/Tcl", text=(
                        "The following commands are available to access the database from the "
                        "body of a PL/Tcl function. "
                        "The spi_exec command executes an SQL command given as a string."))
    asked = SubQuestion(index=0, question="What does the documentation say about Database "
                        "Access from PL/Tcl?", queries=("PL Tcl database access pl/tcl",
                                                        "PL Tcl"), focus=("PL Tcl",))
    ranked = rank(asked, [chapter, access])
    # the chapter's sentences name PL/Tcl, not the database access asked about
    assert ranked and {c.source.url for c in ranked} == {access.url}


def test_the_page_titled_with_the_subject_leads_the_quotes() -> None:
    """PostgreSQL's "Chapter 39. Triggers" is the overview of triggers, but the pages under it
    say "trigger" more often: the report quoted only them. The page titled as asked leads."""
    chapter = Source(url="file:///pg/triggers.html", title="Chapter 39. Triggers", text=(
        "This chapter provides general information about writing trigger functions. "
        "Trigger functions can be written in most of the available procedural languages."))
    behavior = Source(url="file:///pg/trigger-definition.html", title="39.1. Overview of "
                      "Trigger Behavior", text=(
                          "A trigger is a specification that the database should automatically "
                          "execute a particular function whenever a certain type of operation "
                          "is performed. Triggers can be attached to tables, views and foreign "
                          "tables, and a trigger fires before or after the triggering event. "
                          "Row-level triggers fire once per row, statement-level triggers once "
                          "per statement, whatever the trigger does."))
    asked = SubQuestion(index=0, question="How do triggers work?", queries=("triggers",),
                        focus=("triggers",))
    ranked = rank(asked, [behavior, chapter])
    assert ranked[0].source.url.endswith("/triggers.html")
    assert any(c.source.url.endswith("trigger-definition.html") for c in ranked)
