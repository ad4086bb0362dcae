"""The offline outline (core/engine/offline/outline.py, core/relevance/question.py) on corpora
it was never shaped on: a manual with sections, FAQ pages, short notes and a Chinese set,
written here about a made-up tool ("tarn", a backup program), indexed by the real CorpusSearch
(BM25 + the embedder) in a temporary folder.

The outline is the question's own parts (issue 32): a section per part, named in the topic's
words; a comparison asks each option and how they differ, with a column per option and rows
that the question names or the sources' own headings give.
"""

from __future__ import annotations

import re

import pytest

from core.models import ReportDraft, SectionDraft
from core.engine.offline.extractive import ExtractiveEngine
from core.engine.offline.outline import draft_plan
from core.relevance.question import read_question
from core.models import Claim, Evidence, Finding, Message, ResearchPlan, Topic, Transcript
from core.reports.report import assemble, fixed_heading
from core.search.corpus import CorpusSearch
from tests.fakes.documents import html_page

HAN = re.compile(r"[\u4e00-\u9fff]")

MANUAL = {  # a manual page with sections
    "tarn-snapshot.html": ("tarn-snapshot(1)", [
        ("NAME", "tarn-snapshot - record the state of a directory tree in the vault"),
        ("DESCRIPTION", "A snapshot records every file of the tree with its size, owner and "
                        "modification time. Unchanged chunks are stored once, so a snapshot "
                        "of a tree that barely changed costs little space in the vault."),
        ("RETENTION", "Snapshots are kept for 60 days by default; the retention.days setting "
                      "changes how long. tarn prune deletes snapshots older than the "
                      "retention period and frees their chunks."),
    ]),
    "tarn-restore.html": ("tarn-restore(1)", [
        ("NAME", "tarn-restore - write files of a snapshot back to disk"),
        ("DESCRIPTION", "Restore writes the files of a snapshot into a target directory. "
                        "Restore verifies each chunk against its checksum before writing it."),
    ]),
    "tarn-mirror.html": ("tarn-mirror(1)", [
        ("DESCRIPTION", "A mirror copies the vault to a second disk as it is, chunk for chunk. "
                        "A mirror keeps no history of its own: deleting a file in the vault "
                        "deletes it in the mirror at the next run."),
        ("PERFORMANCE", "A mirror is fast because it copies only new chunks; an archive "
                        "compresses every chunk again and is slower to write."),
    ]),
    "tarn-archive.html": ("tarn-archive(1)", [
        ("DESCRIPTION", "An archive packs the snapshots of the vault into one compressed "
                        "file. An archive keeps the full history of snapshots it was given."),
        ("PERFORMANCE", "An archive is slower to write than a mirror, but an archive is "
                        "smaller on disk because every chunk is compressed."),
    ]),
}
FAQ = ("tarn-faq.html", "tarn FAQ", [
    ("Why does the vault grow after I delete files?",
     "The vault keeps chunks as long as a snapshot refers to them; they are freed when tarn "
     "prune removes the last snapshot that uses them."),
    ("Can I restore one file only?",
     "Yes: restore accepts a path and writes that file of the snapshot alone."),
])
NOTES = {  # short notes with no headings at all
    "note-1.txt": "Weekly mirror to the USB disk worked again; the mirror took four minutes.",
    "note-2.txt": "Our gardening club meets on Thursdays to prune the roses and water seedlings.",
}
CHINESE = {
    "zh-mirror.html": ("镜像", [("说明", "镜像把仓库按原样复制到第二块磁盘。镜像不保留自己的历史记录。"),
                                ("性能", "镜像只复制新的数据块，所以镜像的速度很快。")]),
    "zh-archive.html": ("归档", [("说明", "归档把仓库的快照打包成一个压缩文件。归档保留完整的历史记录。"),
                                 ("性能", "归档要重新压缩每个数据块，所以归档的速度较慢，但占用空间更小。")]),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> CorpusSearch:
    root = tmp_path_factory.mktemp("tarn")
    docs = root / "docs"
    docs.mkdir()
    for name, (title, sections) in {**MANUAL, **CHINESE}.items():
        (docs / name).write_text(html_page(title, sections), encoding="utf-8")
    name, title, sections = FAQ
    (docs / name).write_text(html_page(title, sections), encoding="utf-8")
    for name, text in NOTES.items():
        (docs / name).write_text(text + "\n", encoding="utf-8")
    search = CorpusSearch(docs, root / "index.duckdb", workers=1)
    yield search
    search.close()


def _plan(search: CorpusSearch | None, text: str, n: int = 4) -> ResearchPlan:
    return draft_plan(Topic(text=text, max_subquestions=n),
                      search.vocabulary if search is not None else None)


def _echoes(heading: str, topic: str) -> bool:
    if HAN.search(topic):
        t, h = re.sub(r"\s+", "", topic), re.sub(r"\s+", "", heading)
        return any(t[i:i + 10] in h for i in range(max(len(t) - 9, 0)))
    words = re.findall(r"[\w'-]+", topic.lower())
    text = " " + " ".join(re.findall(r"[\w'-]+", heading.lower())) + " "
    return any(" " + " ".join(words[i:i + 6]) + " " in text for i in range(len(words) - 5))


def _report(search: CorpusSearch, plan: ResearchPlan) -> str:
    """The plan researched over the corpus as the product does (search, read, compress)."""
    engine = ExtractiveEngine()
    findings = []
    for sq in plan.subquestions:
        t = Transcript(subquestion=sq)
        for query in sq.queries:
            for hit in search.search(query, 3):
                source = search.read(hit)
                if source and source.url not in {s.url for s in t.sources}:
                    t.sources.append(source)
                    t.messages.append(Message(role="tool", tool_call_id=str(len(t.sources)),
                                              name="read", content=source.title))
        findings.append(engine.compress(t))
    draft = engine.write_report(plan, findings)
    return assemble(plan, findings, draft, report_id="r", engine=engine.name).markdown


# -- what is read from the topic ----------------------------------------------------------------

@pytest.mark.parametrize("text, options", [
    ("How do git rebase and git merge differ when integrating a feature branch?",
     ("git rebase", "git merge")),
    ("Compare threading, multiprocessing and asyncio for concurrent I/O in Python",
     ("threading", "multiprocessing", "asyncio")),
    ("Which should I use for serializing data: json or pickle?", ("json", "pickle")),
    ("JSON in SQLite or PostgreSQL for storing documents?", ("SQLite", "PostgreSQL")),
    ("What is the difference between a mirror and an archive?", ("mirror", "archive")),
    ("Kafka vs RabbitMQ for event streaming", ("Kafka", "RabbitMQ")),
    ("SQLite 和 PostgreSQL 在并发写入上有什么区别？", ("SQLite", "PostgreSQL")),
    ("小型 Web 应用应该选择 SQLite 还是 PostgreSQL？", ("SQLite", "PostgreSQL")),
    ("What does the reflog record in git and how long are its entries kept?", ()),
    ("How does Python's garbage collection and reference counting work?", ()),
])
def test_options_are_read_in_the_common_shapes(text: str, options: tuple[str, ...]) -> None:
    assert read_question(text).options == options


def test_a_question_is_split_into_parts_only_at_its_conjunctions() -> None:
    assert read_question("What does the reflog record in git and how long are its entries "
                         "kept?").parts == ("What does the reflog record in git",
                                            "how long are its entries kept")
    assert len(read_question("How do git rebase and git merge differ?").parts) == 1
    assert read_question("镜像保存什么以及归档保留多久？").parts == ("镜像保存什么", "归档保留多久")


# -- the outline: the question's parts ---------------------------------------------------------

def test_a_comparison_has_a_column_per_option_and_a_row_the_question_names(
        corpus: CorpusSearch) -> None:
    plan = _plan(corpus, "How do mirror and archive differ in keeping history?")
    assert plan.intent == "compare" and plan.targets == ("mirror", "archive")
    assert [sq.question for sq in plan.subquestions] == [
        "mirror in keeping history", "archive in keeping history",
        "How do mirror and archive differ in keeping history?"]
    assert [q.split()[0] for q in plan.subquestions[0].queries] == ["mirror", "mirror"]
    markdown = _report(corpus, plan)
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert rows[0] == "| Dimension | mirror | archive |"
    assert rows[1].startswith("| Keeping history |")
    assert all(cell.strip() not in ("", "—") for cell in rows[1].split("|")[2:4]), rows


def test_an_option_the_corpus_never_names_cannot_be_answered(corpus: CorpusSearch) -> None:
    plan = _plan(corpus, "Is a mirror better than a zfs send stream?")
    assert plan.targets == ("mirror", "zfs")
    assert [p.absent for p in plan.parts] == [(), ("zfs",), ("zfs",)]


def test_each_part_of_a_two_part_question_has_a_section_with_evidence(
        corpus: CorpusSearch) -> None:
    topic = "What does a tarn snapshot record and how long are snapshots kept?"
    plan = _plan(corpus, topic)
    assert [sq.question for sq in plan.subquestions] == [
        "What does a tarn snapshot record?", "How long are snapshots kept?"]
    markdown = _report(corpus, plan)
    for sq in plan.subquestions:
        section = markdown.split(f"## {sq.question}\n", 1)[1].split("\n## ", 1)[0]
        assert "[insufficient evidence]" not in section, markdown
    assert "60 days" in markdown  # the second part is answered: how long


def test_a_faq_question_is_answered_from_its_faq_page(corpus: CorpusSearch) -> None:
    plan = _plan(corpus, "Why does the tarn vault grow after deleting files?")
    markdown = _report(corpus, plan)
    assert "tarn prune removes the last snapshot" in markdown
    assert "[insufficient evidence]" not in markdown


def test_a_chinese_comparison_is_outlined_in_chinese(corpus: CorpusSearch) -> None:
    plan = _plan(corpus, "镜像和归档在历史记录上有什么区别？")
    assert plan.language == "zh" and plan.intent == "compare"
    assert plan.targets == ("镜像", "归档")
    assert [sq.question for sq in plan.subquestions] == [
        "镜像：历史记录", "归档：历史记录", "镜像与归档在历史记录上的区别"]


def test_without_a_corpus_the_plan_is_the_topics_parts() -> None:
    plan = _plan(None, "What does a tarn snapshot record and how long are snapshots kept?")
    assert len(plan.subquestions) == 2 and plan.intent == "describe"


def test_same_corpus_and_topic_same_plan(corpus: CorpusSearch) -> None:
    topic = "How do mirror and archive differ in speed?"
    assert _plan(corpus, topic) == _plan(corpus, topic)


def test_no_heading_is_a_phrase_cut_from_a_sentence(corpus: CorpusSearch) -> None:
    """Every heading is a part of the question, whole: it never ends on a function word (a
    question may end on its preposition) and is never the sources' words cut mid-phrase."""
    function = {"a", "an", "the", "of", "to", "in", "on", "for", "with", "and", "or", "every"}
    for topic in ("What does a tarn snapshot record and how long are snapshots kept?",
                  "How do mirror and archive differ in keeping history?",
                  "Why does the tarn vault grow after deleting files?"):
        for sq in _plan(corpus, topic).subquestions:
            last = re.findall(r"[\w']+", sq.question)[-1].lower()
            assert sq.question.endswith("?") or last not in function, sq.question
            text = " ".join(sections for _, (_, pages) in MANUAL.items()
                            for _, sections in pages)
            assert sq.question not in text


# -- the report's fixed words ---------------------------------------------------------------------

def _assembled(plan: ResearchPlan) -> str:
    ev = Evidence(url="https://zh.example/a", title="甲", quote="异步编程使用事件循环调度协程。")
    other = Evidence(url="https://zh.example/b", title="乙", quote="多线程由操作系统抢占式调度。")
    findings = [Finding(subquestion_index=sq.index, subquestion=sq.question, claims=(
        Claim(text="异步编程使用事件循环调度协程。", evidence=(ev, other), confidence="conflict"),))
        for sq in plan.subquestions]
    draft = ReportDraft(title="报告", summary="摘要 [E1]。", conclusion="结论 [E2]。",
                        comparison_table="| a | b |\n|---|---|\n| x [E1] | y [E2] |",
                        sections=tuple(SectionDraft(subquestion_index=sq.index, heading=sq.question,
                                                    body="内容 [E1]。")
                                       for sq in plan.subquestions))
    return assemble(plan, findings, draft, report_id="r", engine="e").markdown


def test_report_headings_follow_the_plan_language() -> None:
    zh = _assembled(_plan(None, "Python的asyncio和threading有什么区别？", n=2))
    for part in ("summary", "comparison", "conclusion", "disputed", "references"):
        assert f"\n## {fixed_heading(part, 'zh')}\n" in zh, part
    assert "**主题:**" in zh and "**意图:** 比较" in zh
    en = _assembled(_plan(None, "asyncio vs threading", n=2))
    for heading in ("Executive summary", "Comparison", "Conclusion", "Disputed findings",
                    "References"):
        assert f"\n## {heading}\n" in en
    assert fixed_heading("references", "de") == "References"  # no table: English


def test_a_report_on_thin_evidence_says_so_in_its_header() -> None:
    plan = _plan(None, "asyncio vs threading", n=2)
    header = _assembled(plan).split("## ")[0]
    assert "**Evidence:** thin: 2 quote(s) from 2 page(s)" in header  # two quotes only


def test_what_is_compared_in_each_option_is_read_apart_from_a_purpose() -> None:
    """"JSON in SQLite or PostgreSQL": JSON is compared in each option, and the rows are
    facets said of it; "... for concurrent I/O" is a purpose, which narrows no passage."""
    assert read_question("JSON in SQLite or PostgreSQL for storing documents?").respect == "JSON"
    assert read_question("Should I store JSON in SQLite or PostgreSQL?").respect == "store JSON"
    for text in ("Compare threading, multiprocessing and asyncio for concurrent I/O in Python",
                 "Which should I use for serializing data: json or pickle?",
                 "SQLite 和 PostgreSQL 在并发写入上有什么区别？"):
        assert read_question(text).respect == ""
