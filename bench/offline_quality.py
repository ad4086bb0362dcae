"""Offline quality bench: the offline engine, end to end, on corpora nobody tuned it on.

Each topic runs the calls the product makes for one topic (flows/topic.py, tasks/*.py:
plan → research every sub-question over the corpus search → compress → supervisor's waves →
report), in-line and without Prefect, with `CorpusSearch` pointed at the topic's corpus through
the same Settings → RunConfig → run context path the CLI's `--corpus` takes. Corpora:

  sqlalchemy  SQLAlchemy's dialect docstrings (SQLite, PostgreSQL, MySQL, Oracle, SQL Server),
              rendered to HTML pages in a temporary folder (bench/docs_corpus.py)
  zh          examples/corpus-zh with the topics of examples/topics-zh.csv
  pydocs      the bundled CPython docs with the demo's examples/topics.csv
  gitdoc      git's HTML manuals from Debian's git-doc package, with held-out git topics

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
from bench.offline_run import research_offline  # noqa: E402  (imports core when run)


@dataclass(frozen=True)
class Case:
    """A topic and what "on subject" means for it: a cited quote names one of `subject`."""

    corpus: str
    topic: str
    subject: tuple[str, ...]
    max_subquestions: int = 4
    max_rounds: int = 2
    # The question's parts, each as the words an answer to it uses (see ANSWER_RULES); none:
    # one part, the topic's own content words outside its subject terms.
    parts: tuple[tuple[str, ...], ...] = ()
    options: tuple[str, ...] = ()  # a comparison's options, each to name a table column


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
# Git's own manuals (Debian's git-doc): a corpus the engine was never shaped on, with the topics
# of issue 21.
GITDOC_CASES = (
    Case("gitdoc", "How do git rebase and git merge differ when integrating a feature branch?",
         ("rebase", "merge"),
         parts=(("history", "linear", "commit", "conflict", "branch", "upstream", "fast-forward"),),
         options=("rebase", "merge")),
    Case("gitdoc", "What does the reflog record in git and how long are its entries kept?",
         ("reflog",),
         parts=(("record", "update", "tip", "HEAD", "ref", "log"),
                ("expire", "expiry", "days", "kept", "prune", "gc.reflogExpire", "90", "30"))),
    Case("gitdoc", "What does git stash save and how are stashed changes restored?",
         ("stash",),
         parts=(("save", "record", "working", "index", "changes", "modification"),
                ("apply", "pop", "restore", "restoring", "reinstat"))),
)
# Parts and options of the example CSVs' topics (the others use their own words).
PARTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Compare threading, multiprocessing and asyncio for concurrent I/O in Python": (
        ("concurren", "I/O", "parallel", "block", "GIL", "process", "network", "await"),),
    "How does Python's garbage collection and reference counting work?": (
        ("collect", "cycle", "generation", "free", "dealloc", "refcount", "reference count",
         "reclaim", "memory"),),
    "Which should I use for serializing data: json or pickle?": (
        ("serializ", "secur", "untrusted", "format", "object", "human", "interoperab",
         "text", "binary"),),
}
OPTIONS: dict[str, tuple[str, ...]] = {
    "Compare threading, multiprocessing and asyncio for concurrent I/O in Python": (
        "threading", "multiprocessing", "asyncio"),
    "Which should I use for serializing data: json or pickle?": ("json", "pickle"),
    "SQLite 和 PostgreSQL 在并发写入上有什么区别？": ("SQLite", "PostgreSQL"),
    "小型 Web 应用应该选择 SQLite 还是 PostgreSQL？": ("SQLite", "PostgreSQL"),
}
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
            a topic with no listed terms uses its own words of 4+ letters outside a stop list
answers:    on subject, and names a term of one of the question's parts (listed per topic:
            the words an answer to that part uses, e.g. "expire", "days" for "how long are its
            entries kept"); a topic with no listed parts has one, its own content words outside
            its subject terms, matched on their first 5 letters ("concurrent" -> "concu")
parts:      the question's parts with at least one answering quote, of all its parts
echo:       section headings that repeat 6+ consecutive words of the topic (10+ characters of a
            Chinese, Japanese or Korean topic): a template around the topic
columns:    the comparison's options (listed per topic) named in the table's header row
empty:      sections reading "[insufficient evidence]" """
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


def question_parts(case: Case) -> tuple[tuple[str, ...], ...]:
    listed = case.parts or PARTS.get(case.topic, ())
    if listed:
        return listed
    subject = {t.lower() for t in subject_terms(case)}
    words = [w for w in re.findall(r"[A-Za-z][\w-]{3,}", case.topic)
             if w.lower() not in _STOP and w.lower() not in subject
             and not any(w.lower().startswith(t[:5]) for t in subject)]
    cjk = re.sub(r"[A-Za-z0-9\s？?，,。的是在上有什么如何和与还应该选择]+", " ", case.topic).split()
    own = tuple(dict.fromkeys([w[:5] for w in words] + [c for c in cjk if len(c) >= 2]))
    return (own,) if own else ()


def echoes_topic(heading: str, topic: str) -> bool:
    """Whether a heading repeats a long span of the topic (see RULES)."""
    if re.search(r"[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]", topic):
        squeeze = lambda t: re.sub(r"\s+", "", t)  # noqa: E731
        t, h = squeeze(topic), squeeze(heading)
        return any(t[i:i + 10] in h for i in range(max(len(t) - 9, 0)))
    words = [w.lower() for w in re.findall(r"[\w'-]+", topic)]
    text = " " + " ".join(w.lower() for w in re.findall(r"[\w'-]+", heading)) + " "
    return any(" " + " ".join(words[i:i + 6]) + " " in text for i in range(len(words) - 5))


def report_sections(markdown: str) -> list[tuple[str, str]]:
    """(heading, body) of each "## " section of a report."""
    out: list[tuple[str, str]] = []
    for block in re.split(r"(?m)^## ", markdown)[1:]:
        heading, _, body = block.partition("\n")
        out.append((heading.strip(), body))
    return out


def table_columns(markdown: str) -> list[str]:
    header = next((line for line in markdown.splitlines() if line.startswith("| ")), "")
    return [c.strip() for c in header.strip("|").split("|")[1:]]


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
    answers: int = 0
    parts: int = 0
    parts_answered: int = 0
    echo: int = 0
    options: int = 0
    columns: int = 0
    empty: int = 0
    sections: int = 0
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
    parts = question_parts(case)
    answered = [any(names_subject(c.quote, terms) and names_subject(c.quote, p) for p in parts)
                for c in report.citations]
    m.answers = sum(answered)
    m.parts = len(parts)
    m.parts_answered = sum(any(names_subject(c.quote, terms) and names_subject(c.quote, p)
                               for c in report.citations) for p in parts)
    sections = report_sections(report.markdown)
    m.sections = len(sections)
    m.echo = sum(echoes_topic(h, case.topic) for h, _ in sections)  # the title names it
    m.empty = sum("[insufficient evidence]" in body for _, body in sections)
    options = case.options or OPTIONS.get(case.topic, ())
    columns = " | ".join(table_columns(report.markdown)).lower()
    m.options, m.columns = len(options), sum(o.lower() in columns for o in options)
    return m


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
    if corpus == "gitdoc":
        return list(GITDOC_CASES)
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
    if corpus == "gitdoc":
        return gitdoc_folder(work)
    # The bundled CPython docs, named explicitly: an RESEARCHFLOW_CORPUS_DIR in the environment
    # must not stand in for them.
    from core.search.pydocs import materialize_pydocs

    return materialize_pydocs(work / "cache" / "corpus" / "pydocs")


GITDOC = Path("/usr/share/doc/git-doc")


def gitdoc_folder(work: Path) -> Path:
    """Git's HTML manuals (`apt-get install git-doc`), copied without their AsciiDoc sources."""
    if not GITDOC.is_dir():
        raise SystemExit(f"{GITDOC} is missing: apt-get install -y git-doc")
    folder = work / "git-doc"
    for page in GITDOC.rglob("*.html"):
        target = folder / page.relative_to(GITDOC)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    return folder


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
             f"on subject {_share(m.on_subject, m.citations)} · "
             f"answers {_share(m.answers, m.citations)}",
             f"  parts {m.parts_answered}/{m.parts} · echo {m.echo} · "
             f"columns {m.columns}/{m.options} · empty {m.empty}/{m.sections} sections",
             f"  summary: {_one_line(m.summary, 220) or '—'}"]
    lines += [f"  not verbatim: “{_one_line(q)}”" for q in m.not_verbatim[:show_off]]
    lines += [f"  off subject: “{_one_line(q)}”" for q in m.off_subject[:show_off]]
    return "\n".join(lines)


def totals(rows: Sequence[Measured]) -> str:
    done = [r for r in rows if not r.error]
    cited = sum(r.citations for r in done)
    return (f"{len(done)}/{len(rows)} reports · {cited} citations · verbatim "
            f"{_share(sum(r.verbatim for r in done), cited)} · on subject "
            f"{_share(sum(r.on_subject for r in done), cited)} · answers "
            f"{_share(sum(r.answers for r in done), cited)}\n"
            f"parts answered {sum(r.parts_answered for r in done)}/{sum(r.parts for r in done)}"
            f" · headings echoing the topic {sum(r.echo for r in done)} · option columns "
            f"{sum(r.columns for r in done)}/{sum(r.options for r in done)} · empty sections "
            f"{sum(r.empty for r in done)}/{sum(r.sections for r in done)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="a checkout whose core/ to measure (put first "
                                                  "on sys.path); default: this tree")
    parser.add_argument("--corpus", action="append", choices=("sqlalchemy", "zh", "pydocs", "gitdoc"),
                        help="corpora to run (repeatable; default: all four; gitdoc needs "
                             "Debian's git-doc)")
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
        for corpus in args.corpus or ("sqlalchemy", "zh", "pydocs", "gitdoc"):
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
