"""The offline engine's versions of the roles research depth added: choosing pages by the
search ranking, the supervisor's review (one follow-up per section without evidence), and the
report's conclusion and recommendation."""

from __future__ import annotations

import pytest

from core.engine.offline.extractive import ExtractiveEngine
from core.models import Claim, Evidence, Finding, FollowUp, Source, Topic, Transcript
from core.reports.report import assemble
from tests.core.test_depth_roles import SQ, hits
from tests.fakes.memory_search import memory_vocabulary

# The offline planner draws its outline from a corpus: a few pages of one.
CORPUS = [Source(url=f"https://docs.example/{n}", title=n, text=t) for n, t in (
    ("asyncio", "Asyncio runs coroutines on one event loop for I/O. Asyncio tasks wait on "
                "sockets without threads. Blocking calls stall the event loop of asyncio."),
    ("threading", "Threading runs threads that share memory for I/O. Threading waits on "
                  "sockets in several threads. Blocking calls block one thread only."),
    ("io-models", "Blocking calls suit threading; asyncio needs calls that await."),
    ("memory", "Memory per task is small in asyncio and larger in threading."),
    ("sockets", "Sockets are served by asyncio on one loop or by threading with a thread each."),
    ("gc", "Python garbage collection frees cycles of objects. Garbage collection runs in "
           "generations. Reference counting frees most objects at once."),
    ("gc-tuning", "Garbage collection thresholds decide when a generation is collected."),
    ("gc-debug", "The gc module reports what garbage collection found unreachable."))]
OFFLINE = ExtractiveEngine(vocabulary=memory_vocabulary(CORPUS))
COMPARE = OFFLINE.plan(Topic(text="asyncio vs threading for I/O", max_subquestions=3))


def quoted(index: int, question: str, n: int = 1) -> Finding:
    return Finding(subquestion_index=index, subquestion=question, claims=tuple(
        Claim(text=f"Claim {index}.{i} about asyncio.",
              evidence=(Evidence(url=f"https://p{index}.example", title="P",
                                 quote=f"Claim {index}.{i} about asyncio."),))
        for i in range(n)))


def test_offline_choose_keeps_the_search_ranking() -> None:
    transcript = Transcript(subquestion=SQ)
    assert OFFLINE.choose_pages(transcript, hits(5), 3) == [0, 1, 2]
    assert OFFLINE.choose_pages(transcript, hits(2), 6) == [0, 1]


def test_offline_review_asks_one_followup_per_section_without_evidence() -> None:
    assert len(COMPARE.sections) == 3, COMPARE
    first = COMPARE.subquestions[0]
    unquoted = Finding(subquestion_index=1, subquestion=COMPARE.subquestions[1].question,
                       claims=(Claim(text="Asyncio is different."),))
    followups = OFFLINE.review(COMPARE, [quoted(0, first.question), unquoted], [], 1, 3)

    assert [f.parent for f in followups] == [1, 2]
    for f, section in zip(followups, COMPARE.subquestions[1:]):
        assert "wave 1" in f.why and section.question in f.why
        assert f.queries and not set(f.queries) & {q for s in COMPARE.subquestions
                                                  for q in s.queries}


def test_offline_review_is_done_when_every_section_has_evidence() -> None:
    findings = [quoted(sq.index, sq.question) for sq in COMPARE.sections]
    assert OFFLINE.review(COMPARE, findings, [], 1, 3) == []


def test_offline_review_counts_a_followups_evidence_for_its_section() -> None:
    grown = COMPARE.with_followups([FollowUp(question="What about asyncio threading?",
                                             parent=1)], wave=2)
    findings = [quoted(0, "a"), quoted(2, "c"), quoted(3, "follow-up")]
    assert OFFLINE.review(grown, findings, [], 2, 3) == []


def test_offline_review_is_capped_at_its_limit() -> None:
    assert len(OFFLINE.review(COMPARE, [], [], 1, 2)) == 2


@pytest.mark.parametrize("text, intent", [
    ("Which should I use for I/O: asyncio or threading?", "recommend"),
    ("How does Python garbage collection work?", "describe"),
])
def test_offline_reports_have_a_conclusion_and_recommend_a_recommendation(
        text: str, intent: str) -> None:
    plan = OFFLINE.plan(Topic(text=text, max_subquestions=3))
    assert plan.intent == intent
    findings = [quoted(sq.index, sq.question, n=2) for sq in plan.sections]
    draft = OFFLINE.write_report(plan, findings)
    n = len(plan.sections)

    assert draft.conclusion.startswith(f"Quoted evidence answers {n} of {n} sub-questions")
    assert (draft.recommendation is not None) == (intent == "recommend")
    markdown = assemble(plan, findings, draft, report_id="r", engine=OFFLINE.name).markdown
    assert "## Conclusion" in markdown
    assert ("## Recommendation" in markdown) == (intent == "recommend")
    if intent == "recommend":
        assert f"Claim {n - 1}.0 about asyncio." in draft.recommendation  # the last section


def test_offline_conclusion_names_the_sections_still_open() -> None:
    plan = OFFLINE.plan(Topic(text="How does Python garbage collection work, and how are "
                                   "cycles of objects freed?", max_subquestions=3))
    n = len(plan.subquestions)
    assert n >= 2, plan
    draft = OFFLINE.write_report(plan, [quoted(0, plan.subquestions[0].question)])
    assert draft.conclusion.startswith(f"Quoted evidence answers 1 of {n} sub-questions")
    assert plan.subquestions[-1].question in draft.conclusion


def test_a_followup_is_asked_in_the_topics_language() -> None:
    corpus = [Source(url=f"https://docs.example/zh{n}", title=t, text=x) for n, (t, x) in
              enumerate((("条件语句", "每个命令都会返回退出状态，这可以被条件语句使用。"),
                         ("循环", "循环语句会重复执行命令，直到条件不再成立为止。")))]
    engine = ExtractiveEngine(vocabulary=memory_vocabulary(corpus))
    plan = engine.plan(Topic(text="Shell 条件语句是如何工作的？", max_subquestions=2))
    # searched by another word than its own, so a follow-up has something new to search
    plan = plan.model_copy(update={"subquestions": tuple(
        sq.model_copy(update={"queries": ("Shell",)}) for sq in plan.subquestions)})
    followups = engine.review(plan, [], [], 1, 3)
    assert followups and all(f.question.startswith("来源中关于") for f in followups), followups
    # the topic's words, cut as Chinese is, not its whole question
    assert all("如何" not in q for f in followups for q in f.queries), followups
