"""What a topic is about, and the gate before a report (core/relevance), on a corpus nobody
shaped it on: a made-up replicated store ("Corvid"), a write-ahead log page copied three times,
pages about a backup tool, and a Chinese page, indexed by the real CorpusSearch.

Each test is one of issue 32's failures: off-corpus questions stored as reports, words most
pages share deciding the subject, phrases cut from sentences as headings, copies counted as
none, a second document never cited.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.offline_run import research_offline
from core.topics.failures import NoEvidence
from core.models import (Claim, Evidence, Finding, Part, ResearchPlan, SubQuestion, Topic,
                         Vocabulary, WordStats)
from core.relevance.about import about, agree, names
from core.relevance.gate import judge, passed, refused
from core.relevance.subject import read_topic
from core.search.corpus import CorpusSearch
from tests.fakes.documents import html_page, write_docx, write_pdf

WAL = """<html><head><title>Write-ahead logging and checkpoints</title></head><body>
<h1>Write-ahead logging and checkpoints</h1>
<p>With write-ahead logging, every change is first appended to the log file before the database
file itself is modified. Readers keep reading the original pages while writers append new
versions of those pages to the log.</p>
<h2>What a checkpoint does</h2>
<p>A checkpoint copies the pages that were committed to the write-ahead log back into the main
database file. After a checkpoint completes, the log can be reset and reused from its
beginning, so it does not grow without bound.</p>
<p>By default a checkpoint runs automatically when the log reaches about one thousand pages.
Applications can also run a checkpoint manually, for example during idle periods.</p>
<h2>Checkpoints and readers</h2>
<p>A checkpoint cannot copy a page that an active reader may still need, so long-running read
transactions can prevent the checkpoint from finishing and let the log grow.</p>
</body></html>"""

TARN = {
    "tarn-snapshot.html": ("tarn-snapshot(1)", [
        ("DESCRIPTION", "A snapshot records every file of the tree with its size, owner and "
                        "modification time. Unchanged chunks are stored once, so a snapshot of "
                        "a tree that barely changed costs little space in the vault."),
        ("RETENTION", "Snapshots are kept for 60 days by default; the retention.days setting "
                      "changes how long. tarn prune deletes snapshots older than the retention "
                      "period and frees their chunks. Pruning a pair of snapshots at once is "
                      "safe, and a home directory is backed up like any other tree.")]),
    "tarn-restore.html": ("tarn-restore(1)", [
        ("DESCRIPTION", "Restore writes the files of a snapshot into a target directory. "
                        "Restore verifies each chunk against its checksum before writing it. "
                        "A restore of a whole home directory takes as long as its size needs.")]),
    "tarn-mirror.html": ("tarn-mirror(1)", [
        ("DESCRIPTION", "A mirror copies the vault to a second disk as it is, chunk for chunk. "
                        "A mirror keeps no history of its own: deleting a file in the vault "
                        "deletes it in the mirror at the next run.")]),
}


@pytest.fixture(scope="module")
def tarn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = tmp_path_factory.mktemp("tarn") / "docs"
    docs.mkdir()
    for name, (title, sections) in TARN.items():
        (docs / name).write_text(html_page(title, sections), encoding="utf-8")
    return docs


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


def _run(text: str, folder: Path, work: Path):
    return research_offline(Topic(text=text, batch_id="relevance"), folder, work)


# -- off the corpus: refused in one line ----------------------------------------------------------

@pytest.mark.parametrize("question, missing", [
    ("Which wines pair well with grilled salmon?", "wines grilled salmon"),
    ("How do I bake sourdough bread at home?", "bake sourdough bread"),
    ("How does the Kubernetes horizontal pod autoscaler decide when to scale?", "Kubernetes"),
    ("How should I prune apple trees in late winter?", "apple"),
])
def test_a_question_from_another_field_is_refused_with_its_reason(tarn: Path, work: Path,
                                                                  question: str,
                                                                  missing: str) -> None:
    """The corpus shares words with each question ("pair", "home", "prune", "scale"); none of
    those words is what it asks about."""
    with pytest.raises(NoEvidence) as refused:
        _run(question, tarn, work)
    line = str(refused.value)
    assert "\n" not in line and "has no page about" in line and missing in line, line


def test_words_most_pages_share_never_decide_the_subject(tarn: Path, work: Path) -> None:
    search = CorpusSearch(tarn, work / "vocab.duckdb", workers=1)
    try:
        reading = read_topic("What does a tarn snapshot record, and how long are snapshots kept?",
                             search.vocabulary)
    finally:
        search.close()
    # "tarn" is in every title: the corpus's own subject; "snapshot" is what is asked about.
    assert reading.keys[0].lower().startswith("snapshot"), reading.keys
    assert "tarn" not in [k.lower() for k in reading.keys]
    assert [p.heading for p in reading.parts] == [
        "What does a tarn snapshot record?", "How long are snapshots kept?"]



def _counted(counts: dict[str, int], documents: int = 40):
    return lambda words: Vocabulary(documents, {w: WordStats(counts[w], counts[w] // 2)
                                                for w in words if w in counts})


def test_a_name_with_a_plainer_word_beside_it_is_keyed_by_the_name() -> None:
    """"SSH 基础" (SSH basics): "基础" is on more pages than SSH, and a quote naming only it
    ("下面是一些 Unix 文件基础") is not about SSH."""
    # Debian's Chinese reference: 19 chapters, SSH on 10, 基础 on 15 (too few to call it common).
    reading = read_topic("关于SSH 基础，文档是怎么说的？", _counted({"SSH": 10, "基础": 15}, 19),
                         "zh")
    assert reading.keys == ("SSH",) and reading.parts[0].about == ("SSH",)
    assert not about("下面是一些 Unix 文件基础。", "第 1 章 GNU/Linux 教程", "", reading.keys)
    # A plain word rarer than the name beside it is a subject of its own.
    assert "checkpoint" in read_topic("What does a WAL checkpoint do?",
                                      _counted({"WAL": 9, "checkpoint": 3}, 19)).keys


def test_a_books_label_in_the_topic_is_not_its_subject() -> None:
    reading = read_topic("How does Appendix D. SQL Conformance work?",
                         _counted({"SQL": 700, "Conformance": 3, "Appendix": 40, "D": 200},
                                  1100))
    assert reading.keys == ("SQL Conformance",)
    assert not about("This appendix describes how that is configured.", "Appendix N. Color "
                     "Support", "", reading.keys)


def test_a_frame_word_written_into_a_name_is_part_of_it() -> None:
    """"ALTER TYPE" is one command: read as "ALTER" alone, its report quoted ALTER DOMAIN,
    ALTER VIEW and ALTER TRIGGER. "json module" and "a type of lock" keep the frame word out."""
    counts = _counted({"ALTER": 60, "TYPE": 300, "UUID": 6, "Type": 300, "json": 4,
                       "locks": 30}, 1100)
    assert read_topic("What is ALTER TYPE for, and what are its main pitfalls?",
                      counts).keys == ("ALTER TYPE",)
    assert read_topic("What is UUID Type for?", counts).keys == ("UUID Type",)
    assert read_topic("What is Python's json module for?", counts).keys == ("json",)
    assert "type" not in " ".join(read_topic("What type of locks exist?", counts).keys).lower()


def test_a_cross_reference_to_the_subjects_section_is_not_evidence_about_it() -> None:
    """"参见 第 2.1.4 节 “Debian 档案库基础”" says where the subject is treated, nothing of it:
    the Chinese reference's report on 档案库基础 quoted only that."""
    keys = ("档案库基础",)
    assert not about("\"bullseye\"，参考 第 2.1.4 节 “Debian 档案库基础”。", "第 2 章 Debian 软件包管理",
                     "", keys)
    assert about("让我们从系统用户的角度来看看 Debian 档案库基础。", "第 2 章", "", keys)
    assert not about("For details see Section 19.9, “Secure TCP/IP Connections with SSL”.",
                     "20.1. The pg_hba.conf File", "", ("SSL",))
    # a title that quotes a name in turn is one reference
    assert not about("默认配置提供了更合理的更新 (请见 第 2.5.3 节 “档案库层的“Release”文件”).",
                     "第 2 章", "", ("Release",))


# -- the outline is the question's parts ----------------------------------------------------------

def _headings(markdown: str) -> list[str]:
    fixed = {"Executive summary", "Conclusion", "References", "Comparison", "Recommendation"}
    return [h for h in re.findall(r"(?m)^## (.+)$", markdown) if h not in fixed]


def test_each_part_is_a_section_named_in_the_topics_words(tarn: Path, work: Path) -> None:
    run = _run("What does a tarn snapshot record, and how long are snapshots kept?", tarn, work)
    assert _headings(run.report.markdown) == ["What does a tarn snapshot record?",
                                              "How long are snapshots kept?"]
    assert "60 days" in run.report.markdown  # the second part is answered: how long
    assert "[insufficient evidence]" not in run.report.markdown


def test_a_later_parts_pronoun_is_the_subject_so_reports_never_share_a_heading() -> None:
    first = read_topic("What is Python's sqlite3 module for, and what are its main pitfalls?")
    second = read_topic("What is Python's json module for, and what are its main pitfalls?")
    assert first.parts[1].heading == "What are sqlite3's main pitfalls?"
    assert second.parts[1].heading == "What are json's main pitfalls?"
    corvid = read_topic("How does Corvid replicate writes and serve quorum reads?")
    assert [p.heading for p in corvid.parts] == ["How does Corvid replicate writes?",
                                                 "Corvid: serve quorum reads"]


def test_a_list_before_a_shared_verb_is_one_part() -> None:
    assert len(read_topic("How does Python's garbage collection and reference counting "
                          "work?").parts) == 1
    assert len(read_topic("How do I read and write CSV files?").parts) == 1


def test_a_comparison_asks_each_option_for_its_purpose_and_how_they_differ() -> None:
    reading = read_topic("Should I use Postgres or SQLite for a small web app?")
    assert [p.heading for p in reading.parts] == [
        "Postgres for a small web app", "SQLite for a small web app",
        "How do Postgres and SQLite differ for a small web app?"]
    assert [p.kind for p in reading.parts] == ["option", "option", "differ"]
    # the asking around the options is no purpose, and a heading never ends in "with"
    asked = read_topic("What should I know about Extending Python with C or C++?")
    assert [p.heading for p in asked.parts] == [
        "C for Extending Python", "C++ for Extending Python",
        "How do C and C++ differ for Extending Python?"]


# -- copies are one page, and every document is cited ----------------------------------------------

def test_three_copies_of_one_page_are_answered_from_one_of_them(tmp_path: Path,
                                                                work: Path) -> None:
    (tmp_path / "wal" / "mirror").mkdir(parents=True)
    (tmp_path / "wal" / "checkpoints.html").write_text(WAL)
    (tmp_path / "wal" / "mirror" / "checkpoints.html").write_text(
        WAL.replace("</body>", "<p>Mirrored from docs.example.org.</p></body>"))
    (tmp_path / "wal" / "checkpoints.txt").write_text(re.sub(r"<[^>]+>", "", WAL))
    run = _run("What does a write-ahead logging checkpoint do?", tmp_path / "wal", work)
    cited = {c.url.split("#")[0].rsplit("/", 1)[-1] for c in run.report.citations}
    assert len(run.report.citations) >= 3 and cited == {"checkpoints.html"}, cited
    assert "A checkpoint copies the pages" in run.report.markdown


def test_a_question_over_a_docx_and_a_pdf_cites_both(tmp_path: Path, work: Path) -> None:
    folder = tmp_path / "corvid"
    folder.mkdir()
    write_docx(folder / "quorum-reads.docx", "Corvid quorum reads", [
        "Corvid serves a read by asking several replicas of the key and waiting for a quorum "
        "of them to answer.",
        "A quorum read returns the value with the newest version among the answers, so it "
        "sees every write that reached a write quorum."])
    write_pdf(folder / "replication.pdf", "Corvid replication", [
        "Replication in Corvid\nCorvid replicates every write to three nodes chosen by "
        "consistent hashing of the key. A write is acknowledged once a write quorum of two "
        "replicas has stored it durably."])
    run = _run("How does Corvid replicate writes and serve quorum reads?", folder, work)
    cited = {c.url.split("#")[0].rsplit("/", 1)[-1] for c in run.report.citations}
    assert cited == {"quorum-reads.docx", "replication.pdf"}, cited
    assert _headings(run.report.markdown) == ["How does Corvid replicate writes?",
                                              "Corvid: serve quorum reads"]
    assert "[insufficient evidence]" not in run.report.markdown


# -- the gate, for any engine's findings ----------------------------------------------------------

def _plan(*parts: Part) -> ResearchPlan:
    return ResearchPlan(topic="t", brief="t", parts=parts, subquestions=tuple(
        SubQuestion(index=i, question=p.heading, part=i, focus=p.about)
        for i, p in enumerate(parts)))


def _finding(index: int, *quotes: tuple[str, str, str]) -> Finding:
    return Finding(subquestion_index=index, subquestion="q", claims=tuple(
        Claim(text=q, evidence=(Evidence(url=f"https://x.test/{i}", title=title, quote=q,
                                         section=section),))
        for i, (q, title, section) in enumerate(quotes)))


def test_evidence_off_the_subject_is_no_evidence_whoever_quoted_it() -> None:
    """A weak model quoting "a key pair for each account" for a wine question."""
    plan = _plan(Part(text="wines", heading="Which wines pair well with salmon?",
                      about=("wines", "salmon")))
    off = _finding(0, ("Create a key pair for each account.", "git-credential", ""))
    judged = judge(plan, [off])
    assert not judged.answered and judged.findings[0].claims == ()
    with pytest.raises(NoEvidence, match="no page about 'wines / salmon'"):
        passed(plan, [off], "corpus")


def test_on_subject_quotes_that_name_too_little_of_the_question_are_refused() -> None:
    """A weak model's one quote on the asyncio page that names none of how it schedules: the
    gate refuses it (`refused`), so the flow asks the extractive engine for the same pages
    before it fails the topic (flows/topic.py)."""
    part = Part(text="How does asyncio schedule coroutines", heading="How asyncio schedules",
                about=("schedule", "asyncio"), absent=("schedule",),
                words=(("asyncio", 1.0), ("event", 1.0), ("loop", 1.0), ("schedule", 2.1),
                       ("coroutines", 1.0)))
    plan = _plan(part)
    thin = _finding(0, ("Cancellation raises CancelledError.", "Asyncio", "Asyncio"))
    whole = _finding(0, ("Asyncio runs coroutines on a single-threaded event loop.", "Asyncio",
                         "Asyncio"))
    assert refused(plan, judge(plan, [thin])) and judge(plan, [thin]).findings[0].support
    assert not refused(plan, judge(plan, [whole]))
    unparted = plan.model_copy(update={"parts": ()})
    assert not refused(unparted, judge(unparted, [thin]))
    assert refused(unparted, judge(unparted, []))


def test_a_page_or_section_title_naming_the_subject_makes_its_sentences_evidence() -> None:
    plan = _plan(Part(text="reflog", heading="What does the reflog record?", about=("reflog",)))
    titled = _finding(0, ("It records when the tips of branches were updated.",
                          "git-reflog(1)", ""))
    section = _finding(0, ("Entries older than 90 days are pruned.", "git-gc(1)",
                           "Configuration › gc.reflogExpire"))
    untitled = _finding(0, ("Entries older than 90 days are pruned.", "git-gc(1)", "Notes"))
    assert judge(plan, [titled]).answered
    assert not judge(plan, [untitled]).answered
    assert about("Entries expire.", "git-gc(1)", "Configuration › reflog expiry", ("reflog",))


def test_a_part_asking_about_a_word_the_corpus_never_uses_is_unanswered() -> None:
    plan = _plan(Part(text="SQLite", heading="SQLite for a web app", about=("SQLite",),
                      kind="option"),
                 Part(text="Postgres", heading="Postgres for a web app", about=("Postgres",),
                      absent=("Postgres",), kind="option"),
                 Part(text="differ", heading="How do they differ?", about=("SQLite", "Postgres"),
                      absent=("Postgres",), kind="differ"))
    sqlite = _finding(0, ("SQLite stores the whole database in one file.", "sqlite3", ""))
    judged = judge(plan, [sqlite])
    assert [p.heading for p in judged.answered] == ["SQLite for a web app"]
    assert judged.headings == ("Postgres for a web app", "How do they differ?")


def test_how_options_differ_needs_quotes_about_two_of_them() -> None:
    differ = Part(text="d", heading="How do json and pickle differ?", about=("json", "pickle"),
                  kind="differ")
    one = _finding(0, ("json is a text format.", "json", ""))
    two = _finding(0, ("json is a text format.", "json", ""),
                   ("pickle can run code when it loads.", "pickle", ""))
    assert not judge(_plan(differ), [one]).answered
    assert judge(_plan(differ), [two]).answered


def test_an_identifier_starting_with_the_subject_is_another_name() -> None:
    assert not names("param should be an instance of sched_param.", ("sched",))
    assert names("The sched module defines a class.", ("sched",))
    assert agree("collector", "collection") and agree("cancel", "cancellation")
    assert not agree("multipl", "multiprocessing")
    # seven letters shared, then more than an ending: PostgreSQL's "How Extensibility Works"
    # quoted CREATE EXTENSION and DROP EXTENSION
    assert not agree("extensibility", "extension") and agree("configuration", "configured")


# -- the default corpus: a module's question quotes the module's page ------------------------------

@pytest.mark.parametrize("module", ["sqlite3", "json", "contextlib", "bisect"])
def test_a_question_about_a_module_quotes_its_page_under_the_questions_parts(
        module: str, work: Path) -> None:
    """Over CPython's docs, "What is Python's X module for...?" once quoted X's page in 23% of
    its quotes, under headings such as "Module helps"."""
    run = research_offline(Topic(text=f"What is Python's {module} module for, and what are its "
                                      "main pitfalls?", batch_id="modules"), None, work)
    assert _headings(run.report.markdown) == [f"What is Python's {module} module for?",
                                              f"What are {module}'s main pitfalls?"]
    own = [c for c in run.report.citations
           if c.url.split("#")[0].endswith(f"/{module}.md")
           or re.search(rf"(?<![\w.]){module}(?!\w)", c.quote)]
    assert run.report.citations and len(own) >= 0.8 * len(run.report.citations), \
        [(c.url, c.quote) for c in run.report.citations]
    assert any(c.url.split("#")[0].endswith(f"/{module}.md") for c in run.report.citations)
    assert "When in doubt, consult the module reference" not in run.report.markdown


ZH_PAGES = {
    "apt.html": ("软件包管理", [
        ("升级", "在升级之前，请先确认软件源足够成熟，再判断是否需要重启服务。升级会替换旧版本的文件，"
                 "并保留你修改过的配置文件。"),
        ("许可证", "自由软件基金会维护着许多工具，它的许可证允许修改和再发布。")]),
    "ssh.html": ("远程访问", [
        ("SSH 基础", "SSH 是因特网上的安全连接方式。你可以用密钥登录远程主机，而不必每次输入密码。"),
        ("SSH 故障排查", "如果连接突然失败，请检查配置文件的权限，并用详细模式运行客户端来判断原因。")]),
}


def test_a_chinese_question_from_another_field_is_refused(tmp_path: Path, work: Path) -> None:
    """成熟 appears once, in "足够成熟，": a word of its own, and no reason to take a page naming
    it as one about watermelons. 基金 appears once, inside 软件基金会: not a word of the corpus."""
    docs = tmp_path / "zh"
    docs.mkdir()
    for name, (title, sections) in ZH_PAGES.items():
        (docs / name).write_text(html_page(title, sections), encoding="utf-8")
    with pytest.raises(NoEvidence) as refused:
        _run("怎样判断西瓜是否成熟？", docs, work)
    assert "西瓜" in str(refused.value)
    # 基金 only inside 软件基金会 (once): a fund is not a foundation
    with pytest.raises(NoEvidence):
        _run("股票和基金有什么区别？", docs, work)
    report = _run("关于SSH 基础，文档是怎么说的？", docs, work).report
    assert any("安全连接方式" in c.quote for c in report.citations)
