"""The offline engine beyond its demo: a comparison it was never shown, in English and in Chinese,
over corpora written by tests/fakes/topical_corpus.py, end to end through the product's core calls
(bench.offline_quality.research_offline: plan, research, compress, waves, report — no Prefect).

What a user of either language must get: quotes that are the pages' own words and are about
what was asked, a report written in the topic's language, and the same report for the same
corpus and topic, in another process too. A quote is on subject when it comes from one of the pages the generator wrote
about the brokers; the corpus also holds pages that share the questions' generic words, and
pages about the writer Kafka and about rabbits, which a search by words alone finds as well.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.offline_quality import is_verbatim
from bench.offline_run import OfflineRun, research_offline
from tasks import contexts
from core.models import Topic
from tests.fakes.topical_corpus import TopicalCorpus, write_corpus

_CJK = re.compile(r"[\u3400-\u9fff]")


def _run(corpus: TopicalCorpus, work: Path) -> OfflineRun:
    contexts.close()  # as a new process would: no engine or search built for another corpus
    topic = Topic(text=corpus.topic, max_subquestions=4, max_rounds=2, batch_id="e2e")
    return research_offline(topic, corpus.root, work)


@dataclass(frozen=True)
class Researched:
    corpus: TopicalCorpus
    run: OfflineRun


# One run per language, shared by the tests that only read its report (a run takes seconds),
# so the module runs on one xdist worker.
pytestmark = pytest.mark.xdist_group("offline-languages")


@pytest.fixture(scope="module")
def english(tmp_path_factory: pytest.TempPathFactory) -> Researched:
    folder = tmp_path_factory.mktemp("english")
    corpus = write_corpus(folder / "corpus", "en")
    return Researched(corpus, _run(corpus, folder / "work"))


@pytest.fixture(scope="module")
def chinese(tmp_path_factory: pytest.TempPathFactory) -> Researched:
    folder = tmp_path_factory.mktemp("chinese")
    corpus = write_corpus(folder / "corpus", "zh")
    return Researched(corpus, _run(corpus, folder / "work"))


def _verbatim(run: OfflineRun) -> list[str]:
    """Quotes that are the page's own words: in the text the engine read, and in the file."""
    files: dict[str, str] = {}
    return [c.quote for c in run.report.citations
            if c.quote in run.sources.get(c.url, "") and is_verbatim(c.quote, c.url, files)]


def test_english_comparison_quotes_its_pages_verbatim_and_on_subject(english: Researched) -> None:
    corpus, run = english.corpus, english.run

    assert run.plan.intent == "compare"
    assert {t.lower() for t in run.plan.targets} >= {"kafka", "rabbitmq"}
    quotes = [c.quote for c in run.report.citations]
    assert len(quotes) >= 5, run.report.markdown
    assert _verbatim(run) == quotes, "every cited quote is the page's own words"
    off = [c.quote for c in run.report.citations if not corpus.on_subject(c.url)]
    assert len(off) <= 0.2 * len(quotes), off
    for broker in ("Kafka", "RabbitMQ"):  # a comparison quotes both sides
        assert any(broker.lower() in q.lower() for q in quotes), broker


def test_chinese_topic_gets_a_chinese_report_with_verbatim_quotes(chinese: Researched) -> None:
    corpus, run = chinese.corpus, chinese.run
    report = run.report

    assert run.plan.language == "zh" and report.language == "zh"
    for sq in run.plan.subquestions:
        assert _CJK.search(sq.question), f"sub-question not in Chinese: {sq.question}"
        assert not re.search(r"\b(?:What|How|Which|When)\b", sq.question), sq.question
    headings = [line[3:] for line in report.markdown.splitlines() if line.startswith("## ")]
    assert headings
    for heading in headings:
        assert _CJK.search(heading), f"heading not in Chinese: {heading}"
    verbatim = _verbatim(run)
    assert len(verbatim) >= 5, report.markdown
    assert len(verbatim) == len(report.citations)
    off = [c.quote for c in report.citations if not corpus.on_subject(c.url)]
    assert len(off) <= 0.2 * len(report.citations), off


def test_a_chinese_report_says_its_own_words_in_chinese(chinese: Researched) -> None:
    """Headings, table, conclusion, notice: whatever the engine writes besides the quotes, the
    sources' titles and addresses, and the names it compares is in the topic's language."""
    corpus, report = chinese.corpus, chinese.run.report
    own = report.markdown
    for c in report.citations:
        own = own.replace(c.quote, " ").replace(c.title, " ").replace(c.url, " ")
    # A reference's link is labelled with its source's host or file name, not the engine's words.
    own = re.sub(r"\[[^\]]*\]\([^)]*\)", " ", own)
    own = own.replace(corpus.topic, " ")
    # Words with a lower-case letter: acronyms (LLM, SQL) are at home in Chinese prose too.
    words = {w for w in re.findall(r"[A-Za-z]{3,}", own) if not w.isupper()}
    english = sorted(words - {"Kafka", "RabbitMQ", "researchflow"})
    assert not english, f"English words in a Chinese report: {english}"


@pytest.mark.parametrize("language", ["english", "chinese"])
def test_quotes_are_sentences_not_the_page_heading_glued_to_one(
        request: pytest.FixtureRequest, language: str) -> None:
    report = request.getfixturevalue(language).run.report
    assert report.citations
    glued = [c.quote for c in report.citations if c.quote.startswith(c.title)]
    assert not glued


def test_chinese_comparison_is_planned_as_a_comparison_of_both_options(
        chinese: Researched) -> None:
    plan = chinese.run.plan

    assert plan.intent == "compare"
    assert {t.lower() for t in plan.targets} >= {"kafka", "rabbitmq"}
    assert len({sq.question for sq in plan.subquestions}) == len(plan.subquestions)


# The second run is another process with another hash seed: a report that depends on the
# iteration order of a set (or on anything else a process picks afresh) differs.
_AGAIN = """
import json, sys
from pathlib import Path
from bench.offline_run import research_offline
from core.models import Topic
topic = Topic(text=sys.argv[1], max_subquestions=4, max_rounds=2, batch_id="e2e")
run = research_offline(topic, Path(sys.argv[2]), Path(sys.argv[3]))
print(json.dumps({"markdown": run.report.markdown,
                  "quotes": [c.quote for c in run.report.citations]}))
"""


@pytest.mark.parametrize("language", ["english", "chinese"])
def test_same_corpus_and_topic_give_the_same_report(request: pytest.FixtureRequest,
                                                    tmp_path: Path, language: str) -> None:
    done: Researched = request.getfixturevalue(language)
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    again = subprocess.run([sys.executable, "-c", _AGAIN, done.corpus.topic,
                            str(done.corpus.root), str(tmp_path / "again")],
                           cwd=Path(__file__).resolve().parents[2], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": seed})
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(again.stdout.strip().splitlines()[-1])

    assert done.run.report.citations, "an empty report is trivially repeatable"
    assert second["markdown"] == done.run.report.markdown
    assert second["quotes"] == [c.quote for c in done.run.report.citations]


def test_the_corpus_generator_is_deterministic_and_seeded(tmp_path: Path) -> None:
    a = write_corpus(tmp_path / "a", "en", seed=1)
    b = write_corpus(tmp_path / "b", "en", seed=1)
    c = write_corpus(tmp_path / "c", "en", seed=2)
    assert a.pages == b.pages and a.pages != c.pages
    off = [name for name in a.pages if name not in a.on_subject_pages]
    assert len(off) == 5 and a.on_subject(f"file://{a.root}/compare.html#p0")
    assert sum(a.names_subject(a.pages[name]) for name in off) == 1  # the writer Kafka only
