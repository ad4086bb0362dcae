"""Quality on topics nobody chose: questions generated from corpora's own page titles, and
questions from other fields that the corpora cannot answer.

The offline engine, end to end (bench/offline_run.py: the product's own core calls, the gate
included), over three Debian documentation packages as a user would point `--corpus` at them:

  python    /usr/share/doc/python3.11/html       (python3.11-doc; its _sources/*.txt copies too)
  postgres  /usr/share/doc/postgresql-doc-15/html (postgresql-doc-15)
  zh        debian-reference's Chinese chapters   (debian-reference-zh-cn), one topic per section

For each corpus, `--per-corpus` pages (a seeded random draw) become topics: the page's subject,
read from its title ("sqlite3 — DB-API 2.0 interface..." is sqlite3; "30.5. WAL Configuration"
is WAL Configuration; a Chinese chapter's "5.1.1. 主机名解析" is 主机名解析), put into one of a few
question shapes, some of them two questions in one ("What is X for, and what are its main
pitfalls?"). The subject's own page is the gold source (its _sources copy counts as the same
page); for the Chinese chapters, whose pages hold dozens of subjects, the gold is the section
under the subject's own heading. Then every question of bench/data/off_corpus_<lang>.txt (other
fields: cooking, medicine, law...) is asked of the same corpus.

Measured from outside the engine (the files are read here, not through the engine):

  gold cited      on-corpus topics whose report quotes the gold page (section)
  on subject      cited quotes that come from the gold page or name the subject (every word of
                  its name of 3+ letters, by its first five letters; a Chinese name: two thirds
                  of its bigrams)
  parts answered  the question's parts with a quote on subject; a "pitfalls"/"watch out" part
                  needs one that also words a caution (CAUTION below)
  refused         topics that ended without a stored report (the gate's one line, or no
                  citations): off-corpus ones should all be, on-corpus ones none
  headings        section headings that end in a function word (a whole question excepted), and
                  headings that recur in the reports of different topics

Targets (issue 32): gold cited >= 95%; on subject >= 90%; off-corpus refused 100%; on-corpus
refused 0. Five random reports' headings are printed for a reader; `--out DIR` keeps every
report (results.jsonl) to read.

    .venv/bin/python bench/title_topics.py                        # 200 per corpus, 2 workers
    .venv/bin/python bench/title_topics.py --per-corpus 30 --corpus python
    git worktree add -f /tmp/before <rev>
    .venv/bin/python bench/title_topics.py --root /tmp/before     # the engine as it was

Needs the three packages: apt-get install python3.11-doc postgresql-doc-15 debian-reference-zh-cn
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.doc_corpora import CORPORA, Corpus, Page, squeeze  # noqa: E402  (after the path)

# A part asking what to watch out for is answered by a quote that words a caution.
CAUTION = re.compile(r"\b(?:warn\w*|note|caution\w*|careful\w*|avoid\w*|must|never|not|cannot|"
                     r"can't|don't|deprecat\w*|unsafe|insecure|secur\w*|error\w*|rais\w*|risk\w*|"
                     r"problem\w*|pitfall\w*|beware|should|only|limit\w*|danger\w*)\b|"
                     r"注意|警告|小心|不要|避免|必须|不能|不可|可能|风险|危险|错误|问题|谨慎|限制", re.I)
_FUNCTION = frozenset("""a an the of to in on at by for from with into and or but as than that
which who is are was were be been has have had do does did can could will would shall should may
might must not no its their this these those via per about across after before during if when
while whether because so then also just only very every each some any""".split())
_STOP = frozenset("""about after before between does from have into more should than that their
there these they this what when where which while with would using used the and for are its
how can""".split())
FIXED = {"Executive summary", "Comparison", "Recommendation", "Conclusion", "Disputed findings",
         "References", "执行摘要", "对比", "建议", "结论", "存在争议的发现", "参考文献"}


# --- the topics ------------------------------------------------------------------------------------

# (template, its parts: "general" is answered by any quote on subject, "caution" by one that
# words a caution too). {S} is the subject as its title writes it.
SHAPES = {
    "en": [("What is {S} for, and what are its main pitfalls?", ("general", "caution")),
           ("How does {S} work, and what should I watch out for?", ("general", "caution")),
           ("How does {S} work?", ("general",)),
           ("What does the documentation say about {S}?", ("general",)),
           ("What should I know about {S}?", ("general",))],
    "zh": [("{S}有什么作用，以及使用时需要注意什么？", ("general", "caution")),
           ("{S}是如何工作的？", ("general",)),
           ("关于{S}，文档是怎么说的？", ("general",)),
           ("{S}是什么？", ("general",))],
}
PY_MODULE = ("What is Python's {S} module for, and what are its main pitfalls?",
             ("general", "caution"))


@dataclass(frozen=True)
class Case:
    corpus: str
    topic: str
    subject: str = ""  # "" for an off-corpus question
    parts: tuple[str, ...] = ()
    gold: tuple[str, ...] = ()  # file paths
    section: str = ""

    @property
    def off(self) -> bool:
        return not self.subject


def _phrase(subject: str) -> str:
    """The subject inside a sentence: "Compound statements" -> "compound statements"; names
    ("SQLite", "CREATE INDEX", "pg_dump") stay as written."""
    first, *rest = subject.split()
    if first[1:].islower() and first.isalpha() and rest and all(w.islower() for w in rest):
        return first.lower() + subject[len(first):]
    return subject


def cases_for(corpus: Corpus, folder: Path, n: int, seed: int) -> list[Case]:
    rng = random.Random(f"{seed}-{corpus.name}")
    pages = corpus.pages(folder)
    # One topic per subject: pages titled alike ("Implementation" in several chapters) are one
    # question, and each of them is the subject's own page.
    alike: dict[str, list[Page]] = {}
    for page in pages:
        alike.setdefault(page.subject.lower(), []).append(page)
    unique = [same[0] for same in alike.values()]
    drawn = rng.sample(unique, min(n, len(unique)))
    out = []
    for page in drawn:
        module = (corpus.name == "python" and "/library/" in page.path.as_posix()
                  and re.fullmatch(r"[a-z_][\w.]*", page.subject))
        template, parts = PY_MODULE if module and rng.random() < 0.5 else \
            rng.choice(SHAPES[corpus.language])
        text = template.replace("{S}", page.subject if module or corpus.language == "zh"
                                else _phrase(page.subject))
        same = alike[page.subject.lower()]
        out.append(Case(corpus.name, text[0].upper() + text[1:], page.subject, parts,
                        tuple(str(p) for q in same for p in (q.path, *q.twins)),
                        "\n".join(q.section for q in same if q.section)))
    off = DATA / f"off_corpus_{corpus.language}.txt"
    out += [Case(corpus.name, line.strip()) for line in off.read_text(encoding="utf-8")
            .splitlines() if line.strip() and not line.startswith("#")]
    return out


# --- measuring, from outside -----------------------------------------------------------------------

def file_of(url: str) -> str:
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme == "file" else url


def names(text: str, subject: str) -> bool:
    """Whether `text` names the subject (see the module docstring)."""
    han = "".join(re.findall(r"[\u4e00-\u9fff]", subject))
    if han:
        grams = {han[i:i + 2] for i in range(len(han) - 1)} or {han}
        latin = [w for w in re.findall(r"[A-Za-z][\w+.-]*", subject) if len(w) >= 3]
        return (sum(g in text for g in grams) >= max(1, round(len(grams) * 2 / 3))
                and all(w.lower() in text.lower() for w in latin))
    words = [w for w in re.findall(r"[A-Za-z0-9_][\w.+-]*", subject)
             if len(w) >= 3 and w.lower() not in _STOP] or subject.split()
    low = text.lower()
    return all(re.search(rf"(?<![a-z0-9_]){re.escape(w.lower()[:5])}", low) for w in words)


@dataclass
class Result:
    corpus: str
    topic: str
    off: bool
    refused: bool = False
    reason: str = ""
    error: str = ""
    citations: int = 0
    on_subject: int = 0
    gold: bool = False
    gold_page: bool = False
    parts: int = 0
    parts_answered: int = 0
    headings: list[str] = field(default_factory=list)
    subquestions: list[str] = field(default_factory=list)
    markdown: str = ""
    seconds: float = 0.0


def measure(case: Case, report, plan, result: Result) -> None:
    citations = report.citations
    result.citations = len(citations)
    result.headings = [h.strip() for h in re.findall(r"(?m)^## (.*)$", report.markdown)
                       if h.strip() not in FIXED]
    result.subquestions = [sq.question for sq in plan.subquestions]
    result.markdown = report.markdown
    if case.off:
        return
    gold_files = set(case.gold)
    section = case.section
    on = []
    for c in citations:
        from_page = file_of(c.url) in gold_files
        in_gold = from_page and (not section or any(
            squeeze(c.quote) in part for part in section.split("\n")))
        result.gold_page |= from_page
        result.gold |= in_gold
        on.append(in_gold or names(c.quote, case.subject))
    result.on_subject = sum(on)
    result.parts = len(case.parts)
    result.parts_answered = sum(any(ok and (kind == "general" or CAUTION.search(c.quote))
                                    for ok, c in zip(on, citations)) for kind in case.parts)


def ends_badly(heading: str) -> bool:
    """A heading ending in a function word, unless it is a whole question."""
    if heading.rstrip().endswith(("?", "？")):
        return False
    words = re.findall(r"[A-Za-z']+", heading)
    return bool(words) and words[-1].lower() in _FUNCTION


# --- running ---------------------------------------------------------------------------------------

_FOLDER: Path | None = None
_WORK: Path | None = None


def _start(root: str, folder: str, work: str) -> None:
    global _FOLDER, _WORK
    sys.path.insert(0, root)
    _FOLDER, _WORK = Path(folder), Path(work)
    logging_off()


def logging_off() -> None:
    import logging

    logging.disable(logging.WARNING)


def run_case(case: Case) -> Result:
    from bench.offline_run import research_offline
    from core.models import Topic

    result = Result(case.corpus, case.topic, case.off)
    began = time.perf_counter()
    try:
        run = research_offline(Topic(text=case.topic, batch_id="title-topics"), _FOLDER, _WORK)
    except Exception as exc:  # noqa: BLE001 - a refusal, or a crash: told apart below
        if type(exc).__name__ in ("NoEvidence", "TopicRefused"):
            result.refused, result.reason = True, str(exc)
        else:
            result.error = f"{type(exc).__name__}: {exc}"
    else:
        measure(case, run.report, run.plan, result)
        if not run.report.citations:  # the flow fails such a topic: no report is stored
            result.refused, result.reason = True, "no citations"
    result.seconds = round(time.perf_counter() - began, 2)
    return result


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.1%})" if whole else "—"


def summary(name: str, rows: Sequence[Result]) -> str:
    on = [r for r in rows if not r.off]
    off = [r for r in rows if r.off]
    stored = [r for r in on if not r.refused and not r.error]
    cited = sum(r.citations for r in stored)
    bad_end = sum(ends_badly(h) for r in stored + [r for r in off if not r.refused]
                  for h in r.headings)
    by_heading: dict[str, set[str]] = {}
    for r in rows:
        for h in set(r.headings):
            by_heading.setdefault(h, set()).add(r.topic)
    repeated = sum(1 for topics in by_heading.values() if len(topics) > 1)
    return "\n".join([
        f"## {name}: {len(on)} topics from page titles, {len(off)} off-corpus questions",
        f"  gold cited        {_share(sum(r.gold for r in stored), len(on))}"
        + (f"  (gold page {_share(sum(r.gold_page for r in stored), len(on))})"
           if any(r.gold_page != r.gold for r in stored) else ""),
        f"  quotes on subject {_share(sum(r.on_subject for r in stored), cited)}",
        f"  parts answered    {_share(sum(r.parts_answered for r in stored), sum(r.parts for r in on))}",
        f"  off-corpus refused {_share(sum(r.refused for r in off), len(off))}",
        f"  on-corpus refused  {_share(sum(r.refused for r in on), len(on))}",
        f"  errors            {sum(bool(r.error) for r in rows)}",
        f"  headings ending in a function word {bad_end}; headings shared by different topics "
        f"{repeated}",
        f"  seconds per topic {sum(r.seconds for r in rows) / max(len(rows), 1):.1f}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="a checkout whose core/ to measure")
    parser.add_argument("--corpus", action="append", choices=sorted(CORPORA))
    parser.add_argument("--per-corpus", type=int, default=200)
    parser.add_argument("--no-off", action="store_true", help="skip the off-corpus questions")
    parser.add_argument("--off-only", action="store_true", help="only the off-corpus questions")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work", type=Path, help="keep corpora and indexes here (reruns reuse)")
    parser.add_argument("--out", type=Path, help="write results.jsonl here")
    args = parser.parse_args(argv)
    root = str((args.root or ROOT).resolve())
    sys.path.insert(0, root)
    logging_off()
    work = args.work or Path(tempfile.mkdtemp(prefix="rf-title-topics-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"engine tree: {root}")
    every: list[Result] = []
    try:
        for name in args.corpus or sorted(CORPORA):
            corpus = CORPORA[name]
            if not corpus.source.is_dir():
                print(f"{name}: {corpus.source} is missing (see the module docstring)")
                return 2
            folder = work / "corpora" / name
            if not folder.is_dir():
                corpus.copy(corpus.source, folder)
            cases = cases_for(corpus, folder, args.per_corpus, args.seed)
            if args.no_off:
                cases = [c for c in cases if not c.off]
            if args.off_only:
                cases = [c for c in cases if c.off]
            print(f"\n# {name}: {folder} ({len(cases)} topics)", flush=True)
            index_work = work / "runs" / name
            _start(root, str(folder), str(index_work))  # the index is built here, once
            run_case(Case(name, "warm the corpus index", "index"))
            with multiprocessing.get_context("spawn").Pool(
                    args.workers, _start, (root, str(folder), str(index_work))) as pool:
                rows = []
                for i, row in enumerate(pool.imap(run_case, cases), start=1):
                    rows.append(row)
                    if i % 25 == 0:
                        print(f"  {i}/{len(cases)}", flush=True)
            every += rows
            for row in rows:
                if row.error:
                    print(f"  ERROR {row.topic}: {row.error[:300]}")
                elif row.off and not row.refused:
                    print(f"  off-corpus stored: {row.topic} -> {row.headings[:4]}")
                elif not row.off and row.refused:
                    print(f"  on-corpus refused: {row.topic}: {row.reason[:160]}")
            print(summary(name, rows), flush=True)
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                with (args.out / "results.jsonl").open("a", encoding="utf-8") as fh:
                    for row in rows:
                        fh.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")
        shown = [r for r in every if not r.refused and not r.error]
        print("\n# five random reports' headings")
        for r in random.Random(args.seed).sample(shown, min(5, len(shown))):
            print(f"- [{r.corpus}] {r.topic}\n    " + "\n    ".join(r.headings))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
