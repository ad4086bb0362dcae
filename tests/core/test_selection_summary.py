"""The extractive report's executive summary (core/engine/offline/summary.py, through
ExtractiveEngine.write_report): chosen for coverage of the sections, not their first lines.

Texts are written for the test; the real offline embedder runs.
"""

from __future__ import annotations

from core.engine.offline.extractive import ExtractiveEngine
from core.engine.offline.summary import summarize
from core.models import Claim, Evidence, Finding, ResearchPlan, SubQuestion
from core.reports.report import assemble

FOCUS = ("heat pumps",)
QUESTIONS = ("What are heat pumps and what are they for?",
             "How do heat pumps perform in cold weather?",
             "What do heat pumps cost to install?")


def _claim(text: str, n: int) -> Claim:
    url = f"https://heat.example/p{n}"
    return Claim(text=text, evidence=(Evidence(url=url, title="Heat pumps", quote=text),))


def _plan(questions: tuple[str, ...] = QUESTIONS) -> ResearchPlan:
    return ResearchPlan(topic="How do heat pumps work?", brief="Research heat pumps.",
                        subquestions=tuple(SubQuestion(index=i, question=q, focus=FOCUS)
                                           for i, q in enumerate(questions)))


SECTIONS = (
    (  # a definitional fragment first, as a page's first matching line often is
        "A label kept for bookkeeping purposes only.",
        "Heat pumps move warmth from outdoor air into a house instead of burning fuel.",
        "A heat pump runs a refrigeration cycle in reverse to warm the rooms of a house.",
    ),
    (
        "It loses some output when the air outside is very cold.",
        "A heat pump setting used for cold weather performance in heat pumps.",
        "Heat pumps keep heating in freezing air, although each unit of electricity then gives "
        "less warmth.",
        "Modern heat pumps with vapour injection still heat a house at minus twenty degrees.",
    ),
    (
        "Installing an air-source heat pump costs more than replacing a gas boiler.",
        "Grants pay part of what a heat pump costs to install in many countries.",
    ),
)


def _findings() -> list[Finding]:
    n = 0
    out = []
    for i, texts in enumerate(SECTIONS):
        claims = []
        for t in texts:
            n += 1
            claims.append(_claim(t, n))
        out.append(Finding(subquestion_index=i, subquestion=QUESTIONS[i], claims=tuple(claims)))
    return out


def test_summary_has_one_line_per_section_and_skips_fragments_and_pronouns() -> None:
    draft = ExtractiveEngine().write_report(_plan(), _findings())
    assert "bookkeeping" not in draft.summary  # does not name the subject
    assert "It loses" not in draft.summary  # leans on an antecedent the summary lacks
    assert "setting used" not in draft.summary  # a verbless definition, though it names them
    cited = [line for line in draft.summary.split("] ") if line]
    assert len(cited) == 3  # every section is covered
    for texts in SECTIONS:
        assert sum(t in draft.summary for t in texts) == 1


def test_summary_takes_the_section_claim_central_to_its_question() -> None:
    picked = summarize(_plan(), [(q, f.claims) for q, f in zip(QUESTIONS, _findings())])
    # Section 2: the claims about cold air, not the pronoun line; section 3: about install cost.
    assert "freezing" in picked[1].text or "minus twenty" in picked[1].text
    assert "install" in picked[2].text


def test_summary_skips_a_line_that_repeats_one_already_picked() -> None:
    repeat = "Heat pumps move warmth from outdoor air into a house instead of burning fuel."
    sections = [(QUESTIONS[0], (_claim(repeat, 1),)),
                (QUESTIONS[1], (_claim(repeat.replace("a house", "the house"), 2),
                                _claim("Heat pumps keep heating in freezing air at night.", 3)))]
    picked = summarize(_plan(QUESTIONS[:2]), sections)
    assert [c.text for c in picked] == [repeat,
                                         "Heat pumps keep heating in freezing air at night."]


def test_chinese_summary_quotes_claims_that_name_the_subject() -> None:
    questions = ("锂离子电池容量衰减的主要机制是什么？", "如何减缓锂离子电池的容量衰减？")
    plan = ResearchPlan(topic="锂离子电池容量衰减", brief="研究", language="zh",
                        subquestions=tuple(SubQuestion(index=i, question=q, focus=("锂离子电池",),
                                                       language="zh")
                                           for i, q in enumerate(questions)))
    sections = [(questions[0], (_claim("本文仅用于内部标识用途。", 1),
                                _claim("活性锂的损失是锂离子电池容量衰减最主要的原因之一。", 2))),
                (questions[1], (_claim("这种方法能减缓衰减。", 3),
                                _claim("电解液添加剂可以稳定界面膜，从而减缓锂离子电池的容量衰减。", 4)))]
    picked = [c.text for c in summarize(plan, sections)]
    assert picked == ["活性锂的损失是锂离子电池容量衰减最主要的原因之一。",
                      "电解液添加剂可以稳定界面膜，从而减缓锂离子电池的容量衰减。"]


def test_summary_is_deterministic_and_cites_the_catalogue() -> None:
    engine = ExtractiveEngine()
    first = engine.write_report(_plan(), _findings())
    second = engine.write_report(_plan(), _findings())
    assert first.summary == second.summary
    report = assemble(_plan(), _findings(), first, report_id="r_s", engine=engine.name,
                      notice=engine.notice)
    assert report.citations and "[E" not in report.markdown


def test_a_comparison_summary_names_each_option_it_can() -> None:
    questions = ("How do trams and buses differ in capacity?", "How do trams and buses differ "
                 "in cost?")
    plan = ResearchPlan(topic="Compare trams and buses", brief="Compare.", intent="compare",
                        targets=("trams", "buses"),
                        subquestions=tuple(SubQuestion(index=i, question=q,
                                                       focus=("trams", "buses"))
                                           for i, q in enumerate(questions)))
    sections = [(questions[0], (_claim("Trams carry more riders per hour than a street can.", 1),)),
                (questions[1], (_claim("Trams cost more to build because they need rails and "
                                       "overhead wires.", 2),
                                _claim("Buses cost less to start, since they only need roads "
                                       "that already exist.", 3)))]
    picked = [c.text for c in summarize(plan, sections)]
    assert picked[1].startswith("Buses")  # trams were named already: the other option next


def test_a_summary_opens_on_the_subjects_own_page_over_a_neighbour_naming_it(monkeypatch) -> None:
    """Read from PostgreSQL's docs: "What is pg_opclass for?" was summed up by pg_opfamily's
    sentence naming pg_opclass among three catalogs, not by pg_opclass's own definition."""
    def claim(text: str, title: str) -> Claim:
        return Claim(text=text, evidence=(Evidence(url=f"https://pg.example/{title}",
                                                   title=title, quote=text),))

    question = "What is pg_opclass for?"
    plan = ResearchPlan(topic=question, brief="", subquestions=(
        SubQuestion(index=0, question=question, focus=("pg_opclass",)),))
    own = claim("The catalog pg_opclass defines index access method operator classes.",
                "53.33. pg_opclass")
    neighbour = claim("The majority of the information defining an operator family is not in "
                      "its pg_opfamily row, but in the associated rows in pg_amop, pg_amproc, "
                      "and pg_opclass.", "53.35. pg_opfamily")
    sections = [(question, (own, neighbour))]
    assert summarize(plan, sections) == [own]
    monkeypatch.setattr("core.engine.offline.summary.HOME", 0.0)
    assert summarize(plan, sections) == [neighbour]  # what it picked before


def test_a_summary_line_never_opens_on_a_connective_that_leans_on_an_earlier_one() -> None:
    question = "What is pg_opclass for?"
    plan = ResearchPlan(topic=question, brief="", subquestions=(
        SubQuestion(index=0, question=question, focus=("pg_opclass",)),))
    leaning = [_claim(t, n) for n, t in enumerate((
        "For example, a pg_opclass row names the operator family it belongs to.",
        "Also, there must be no more than one default pg_opclass row per data type.",
        "相似地，pg_opclass 也有默认行。"))]
    assert summarize(plan, [(question, tuple(leaning))]) == []
    plain = _claim("Instead of a default, a pg_opclass row can be named in CREATE INDEX.", 9)
    assert summarize(plan, [(question, (*leaning, plain))]) == [plain]
