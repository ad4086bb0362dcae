"""Offline quality bench: the offline engine, end to end, on corpora nobody tuned it on.

Each topic runs the calls the product makes for one topic (flows/topic.py, tasks/*.py:
plan → research every sub-question over the corpus search → compress → supervisor's waves →
report), in-line and without Prefect, with `CorpusSearch` pointed at the topic's corpus through
the same Settings → RunConfig → runtime path the CLI's `--corpus` takes. Corpora:

  sqlalchemy  SQLAlchemy's dialect docstrings (SQLite, PostgreSQL, MySQL, Oracle, SQL Server),
              rendered to HTML pages in a temporary folder (bench/docs_corpus.py)
  zh          examples/corpus-zh with the topics of examples/topics-zh.csv
  pydocs      the bundled CPython docs with the demo's examples/topics.csv

Per topic it prints the intent, the sub-questions, citations, and the share of cited quotes that
are verbatim in their document and on the topic's subject (rules printed with the table, and
measured from outside: the documents are read here, not through the engine), and the first line
of the report's summary. Nothing is judged by a model and nothing is timed.

    .venv/bin/python bench/offline_quality.py
    .venv/bin/python bench/offline_quality.py --corpus zh --show-report
    git worktree add -f /tmp/quality-before 0bf3303
    .venv/bin/python bench/offline_quality.py --root /tmp/quality-before   # the engine as it was
"""

from __future__ import annotations

import argparse
import csv
import html
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from core.models import Report, ResearchPlan, Topic

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
if str(ROOT) not in sys.path:  # run as a script: bench/ from this tree, whatever --root says
    sys.path.insert(0, str(ROOT))

from bench.docs_corpus import write_docs_corpus  # noqa: E402  (imports no core)


@dataclass(frozen=True)
class Case:
    """A topic and what "on subject" means for it: a cited quote names one of `subject`."""

    corpus: str
    topic: str
    subject: tuple[str, ...]
    max_subquestions: int = 4
    max_rounds: int = 2


SQLALCHEMY_CASES = (
    Case("sqlalchemy", "How do SQLite and PostgreSQL handle concurrent writes?",
         ("SQLite", "PostgreSQL", "Postgres")),
    Case("sqlalchemy", "How does SQLAlchemy handle transaction isolation in SQLite?",
         ("SQLite", "pysqlite", "aiosqlite")),
    Case("sqlalchemy", "JSON in SQLite or PostgreSQL for storing documents?",
         ("JSON", "JSONB")),
    Case("sqlalchemy", "Compare MySQL and PostgreSQL upserts: ON DUPLICATE KEY UPDATE versus "
                       "ON CONFLICT", ("MySQL", "MariaDB", "PostgreSQL", "upsert",
                                       "ON CONFLICT", "ON DUPLICATE KEY")),
)
# Subject terms of the example CSVs' topics; a topic not listed here falls back to its own
# content words (see `subject_terms`).
SUBJECTS: dict[str, tuple[str, ...]] = {
    "SQLite 和 PostgreSQL 在并发写入上有什么区别？": ("SQLite", "PostgreSQL"),
    "SQLite 的 WAL 模式是如何工作的？": ("WAL", "预写日志"),
    "小型 Web 应用应该选择 SQLite 还是 PostgreSQL？": ("SQLite", "PostgreSQL"),
    "Compare threading, multiprocessing and asyncio for concurrent I/O in Python": (
        "thread", "multiprocessing", "asyncio", "coroutine", "event loop"),
    "How does Python's garbage collection and reference counting work?": (
        "garbage", "reference count", "refcount", "gc"),
    "Which should I use for serializing data: json or pickle?": ("json", "pickl", "serializ"),
}
RULES = """\
verbatim:   the quote, all whitespace removed (and list markers "- " opening a line, if that
            is what it takes), is a substring of the text of the file its URL names, read here
            (HTML tags dropped, entities decoded, all whitespace removed)
on subject: the quote names one of the topic's subject terms (listed per topic): a Latin term
            at a word start, any case ("thread" matches "Threads"), a Chinese term anywhere;
            a topic with no listed terms uses its own words of 4+ letters outside a stop list"""
_STOP = frozenset("about between compare does each from have into more should than that their "
                  "there these they this what when where which while with would using".split())


# --- measuring, from outside the engine ---------------------------------------------------------

class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def document_text(path: Path) -> str:
    """What a reader sees in the file: HTML without tags, other files as they are."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix.lower() not in (".html", ".htm"):
        return raw
    parser = _Text()
    parser.feed(raw)
    return "".join(parser.parts)


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", html.unescape(text))


def is_verbatim(quote: str, url: str, cache: dict[str, str]) -> bool:
    """Whether the quote is in the document its URL names (see RULES)."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return False
    path = unquote(parts.path)
    if path not in cache:
        try:
            cache[path] = _squeeze(document_text(Path(path)))
        except OSError:
            cache[path] = ""
    # The extractor may render a list item as a line opening with "- ": layout, not words
    # (a dash the page itself wrote at a line start stays: either form may match).
    unlisted = re.sub(r"(?m)^\s*[-*•]\s+", "", quote)
    return bool(quote.strip()) and (_squeeze(quote) in cache[path]
                                    or _squeeze(unlisted) in cache[path])


def subject_terms(case: Case) -> tuple[str, ...]:
    if case.subject:
        return case.subject
    words = re.findall(r"[A-Za-z][\w-]{3,}", case.topic)
    return tuple(dict.fromkeys(w for w in words if w.lower() not in _STOP))


def names_subject(text: str, terms: Sequence[str]) -> bool:
    """Whether `text` names a term (see RULES)."""
    for term in terms:
        if re.search(r"[A-Za-z]", term[:1]):
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(term)}", text, re.I):
                return True
        elif term in text:
            return True
    return False


def summary_line(markdown: str) -> str:
    """The first line of prose under the report's first section heading (its summary)."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
    if start is None:
        return ""
    for line in lines[start + 1:]:
        text = line.strip()
        if text.startswith("## "):
            break
        if text and not text.startswith(("|", ">", "#")):
            return text
    return ""


@dataclass
class Measured:
    case: Case
    intent: str = ""
    targets: tuple[str, ...] = ()
    language: str = ""
    subquestions: tuple[str, ...] = ()
    citations: int = 0
    verbatim: int = 0
    on_subject: int = 0
    summary: str = ""
    markdown: str = ""
    error: str = ""
    off_subject: list[str] = field(default_factory=list)
    not_verbatim: list[str] = field(default_factory=list)


def measure(case: Case, plan: ResearchPlan, report: Report) -> Measured:
    terms = subject_terms(case)
    docs: dict[str, str] = {}
    m = Measured(case, intent=plan.intent, targets=tuple(plan.targets), language=plan.language,
                 subquestions=tuple(sq.question for sq in plan.subquestions),
                 citations=len(report.citations), summary=summary_line(report.markdown),
                 markdown=report.markdown)
    for c in report.citations:
        if is_verbatim(c.quote, c.url, docs):
            m.verbatim += 1
        else:
            m.not_verbatim.append(c.quote)
        if names_subject(c.quote, terms):
            m.on_subject += 1
        else:
            m.off_subject.append(c.quote)
    return m


# --- the pipeline, as the product runs it for one topic ------------------------------------------

@dataclass(frozen=True)
class OfflineRun:
    plan: ResearchPlan
    report: Report
    sources: dict[str, str]  # url -> the text the engine read


def research_offline(topic: Topic, corpus_dir: Path | None, work: Path) -> OfflineRun:
    """One topic through the product's core calls with the offline engine over `corpus_dir`
    (None: the bundled CPython docs); indexes and caches live under `work`.

    The calls are those of flows/research.run_topic and the task bodies it runs, in-line and in
    order (bench/overhead_plain.py does the same in threads): the plan, each wave's researchers
    and compressions, the supervisor's review between waves, the report. Nothing is stored."""
    from core.overflow.recovery import compress_with_shrink, report_with_shrink
    from core.overflow.roles import plan_with_shrink, review_with_shrink
    from core.report import assemble, report_id_for
    from core.engine.offline.words import notice_of
    from core.researcher import DirectSteps, research_subquestion
    from core.runtime import current
    from core.settings import Settings, run_config
    from core.waves import MAX_FOLLOWUPS, affordable_followups, for_report, gaps

    settings = Settings.load(model="offline", search="corpus", corpus_dir=corpus_dir,
                             cache_dir=work / "cache", db_path=work / "unused.duckdb")
    config = run_config(settings)
    engine, search = current().engine(config), current().search(config)
    steps = DirectSteps(engine, search)

    def wave(subquestions: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        transcripts = [research_subquestion(steps, sq, max_rounds=topic.max_rounds,
                                            max_pages=topic.max_pages,
                                            results_per_query=config.results_per_query)
                       for sq in subquestions]
        findings = [compress_with_shrink(engine.for_role("compress"), t) for t in transcripts]
        return findings, transcripts

    plan = plan_with_shrink(engine.for_role("plan"), topic)
    findings, transcripts = wave(plan.subquestions)
    for number in range(2, topic.max_waves + 1):
        limit = affordable_followups(MAX_FOLLOWUPS, spent=0.0, cap=None,  # offline costs nothing
                                     researched=len(plan.subquestions))
        followups = review_with_shrink(engine.for_role("plan"), plan, findings,
                                       gaps(plan, findings), number - 1, limit)
        if not followups:
            break
        plan = plan.with_followups(followups, number)
        more, read = wave(plan.subquestions[-len(followups):])
        findings, transcripts = findings + more, transcripts + read
    writer = engine.for_role("report")
    draft, kept = report_with_shrink(writer, plan, for_report(plan, findings),
                                     window=writer.context_window(),
                                     max_output_tokens=config.max_output_tokens)
    report = assemble(plan, kept, draft, report_id=report_id_for(topic.batch_id, topic.topic_id),
                      engine=engine.name, notice=notice_of(engine, plan.language))
    return OfflineRun(plan, report, {s.url: s.text for t in transcripts for s in t.sources})


# --- corpora and topics --------------------------------------------------------------------------

def _csv_cases(corpus: str, path: Path) -> list[Case]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [Case(corpus, row["topic"].strip(), SUBJECTS.get(row["topic"].strip(), ()),
                 int(row.get("max_subquestions") or 4), int(row.get("max_rounds") or 2))
            for row in rows if row.get("topic", "").strip()]


def cases_for(corpus: str) -> list[Case]:
    if corpus == "sqlalchemy":
        return list(SQLALCHEMY_CASES)
    if corpus == "zh":
        return _csv_cases("zh", EXAMPLES / "topics-zh.csv")
    return _csv_cases("pydocs", EXAMPLES / "topics.csv")


def corpus_folder(corpus: str, work: Path) -> Path:
    if corpus == "sqlalchemy":
        folder = work / "sqlalchemy-docs"
        pages = write_docs_corpus(folder)
        print(f"sqlalchemy corpus: {len(pages)} pages from dialect docstrings in {folder}",
              file=sys.stderr)
        return folder
    if corpus == "zh":
        return EXAMPLES / "corpus-zh"
    # The bundled CPython docs, named explicitly: an RESEARCHFLOW_CORPUS_DIR in the environment
    # must not stand in for them.
    from core.search.pydocs import materialize_pydocs

    return materialize_pydocs(work / "cache" / "corpus" / "pydocs")


# --- printing ------------------------------------------------------------------------------------

def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "—"


def _one_line(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def describe(m: Measured, *, show_off: int = 2) -> str:
    if m.error:
        return f"### {m.case.topic}\n  FAILED: {m.error}"
    lines = [f"### [{m.case.corpus}] {m.case.topic}",
             f"  intent {m.intent}" + (f" · targets {', '.join(m.targets)}" if m.targets else "")
             + f" · language {m.language} · subject terms {', '.join(subject_terms(m.case))}",
             "  sub-questions:", *(f"    - {q}" for q in m.subquestions),
             f"  citations {m.citations} · verbatim {_share(m.verbatim, m.citations)} · "
             f"on subject {_share(m.on_subject, m.citations)}",
             f"  summary: {_one_line(m.summary, 220) or '—'}"]
    lines += [f"  not verbatim: “{_one_line(q)}”" for q in m.not_verbatim[:show_off]]
    lines += [f"  off subject: “{_one_line(q)}”" for q in m.off_subject[:show_off]]
    return "\n".join(lines)


def totals(rows: Sequence[Measured]) -> str:
    done = [r for r in rows if not r.error]
    cited = sum(r.citations for r in done)
    return (f"{len(done)}/{len(rows)} reports · {cited} citations · verbatim "
            f"{_share(sum(r.verbatim for r in done), cited)} · on subject "
            f"{_share(sum(r.on_subject for r in done), cited)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="a checkout whose core/ to measure (put first "
                                                  "on sys.path); default: this tree")
    parser.add_argument("--corpus", action="append", choices=("sqlalchemy", "zh", "pydocs"),
                        help="corpora to run (repeatable; default: all three)")
    parser.add_argument("--show-report", action="store_true", help="print each report too")
    args = parser.parse_args(argv)
    root = (args.root or ROOT).resolve()
    # Before anything imports core: the tree under measurement wins, this one supplies bench/.
    sys.path.insert(0, str(root))
    import core

    print(f"engine tree: {Path(core.__file__).parent.parent}")
    print(RULES)
    from core.models import Topic

    work = Path(tempfile.mkdtemp(prefix="rf-offline-quality-"))
    rows: list[Measured] = []
    try:
        for corpus in args.corpus or ("sqlalchemy", "zh", "pydocs"):
            folder = corpus_folder(corpus, work)
            print(f"\n## corpus {corpus}: {folder}")
            for case in cases_for(corpus):
                topic = Topic(text=case.topic, max_subquestions=case.max_subquestions,
                              max_rounds=case.max_rounds, batch_id="offline-quality")
                try:
                    run = research_offline(topic, folder, work)
                except Exception as exc:  # noqa: BLE001 - one topic's failure is a row
                    rows.append(Measured(case, error=f"{type(exc).__name__}: {exc}"))
                else:
                    rows.append(measure(case, run.plan, run.report))
                print(describe(rows[-1]), flush=True)
                if args.show_report and not rows[-1].error:
                    print("\n" + rows[-1].markdown + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n" + totals(rows))
    return 0 if rows and not any(r.error for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
