"""Quality bench: the reports' quality on DeepResearch Bench's measures, with real keys.

Eight fixed topics (half English, half Chinese, as in DeepResearch Bench's 100 tasks; describe,
compare and recommend intents) run through the real flows, and each report is scored:

- RACE dimensions (comprehensiveness, depth/insight, instruction-following, readability), 0-10
  each from one LLM-judge call, shown 0-100, with their mean as an overall RACE-like score. Real
  RACE is reference-relative (a report is scored against a reference report, with task-specific
  criteria and weights); ours are absolute scores on the same dimensions, printed beside the
  published anchors for orientation, not as equivalents.
- FACT-style citation accuracy: per (sentence, cited reference) pair the judge decides whether the
  listed quote supports the sentence (FACT reads the cited page; we judge the verbatim quote); a
  number missing from the References is unsupported. Effective citations = distinct supported
  (url, quote) per report.
- Measured, no judge: citations per section, distinct URLs cited, share of prose sentences with a
  citation, cost per report from the usage ledger (the judge runs outside the flows, unrecorded).

A judge failure (provider error, or invalid JSON twice) leaves a score missing, not zero. Without
SERPAPI_API_KEY the topics search a local corpus (CPython docs unless --corpus): expect low scores.

    OPENAI_API_KEY=... SERPAPI_API_KEY=... .venv/bin/python bench/quality.py --topics 4
    ANTHROPIC_API_KEY=... .venv/bin/python bench/quality.py --db q.duckdb --json q.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field, SecretStr, ValidationError

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ importable
    sys.path.insert(0, str(ROOT))

from core.llm.base import ChatModel  # noqa: E402  (none of these imports prefect)
from core.models import Message  # noqa: E402
from core.signals import RateLimited, Signal, Transient  # noqa: E402
from bench.report_facts import (CitationPair, MeasuredFacts, citation_pairs,  # noqa: E402
                                measured_facts)

# (lang, intent, topic), interleaved so that any --topics N >= 3 mixes languages and intents.
TOPICS = (
    ("en", "describe", "How does Python's asyncio event loop schedule coroutines, and what "
                       "happens when a coroutine makes a blocking call?"),
    ("zh", "compare", "比较 PostgreSQL 和 SQLite 在小型多用户 Web 应用中的优缺点"),
    ("en", "recommend", "Should a five-person Python team package its services with uv, Poetry "
                        "or pip-tools? Recommend one and say when another would be better."),
    ("zh", "describe", "锂离子电池容量衰减的主要机制有哪些？"),
    ("en", "compare", "Compare heat pumps and gas boilers for heating an older house in a cold "
                      "climate: running cost, emissions and installation."),
    ("zh", "recommend", "初创公司的移动应用后端应选择 Firebase、Supabase 还是自建服务？请给出建议和理由。"),
    ("en", "describe", "What are the main causes of ocean acidification, and how does it affect "
                       "coral reefs and shellfish?"),
    ("zh", "compare", "对比太阳能光伏与陆上风电在中国的度电成本和并网难题"),
)
# Published anchors on DeepResearch Bench: RACE overall, and FACT citation accuracy.
ANCHORS = {"race_open_deep_research": 43.44, "race_best_commercial": 48.88,
           "best_commercial": "Gemini-2.5-Pro Deep Research", "citation_accuracy_best": 0.94}

# --- scores (pure) -----------------------------------------------------------------------------

RACE_DIMENSIONS = ("comprehensiveness", "depth", "instruction_following", "readability")


class RaceJudgement(BaseModel):
    rationale: str = ""  # first, so the judge reasons before it scores
    comprehensiveness: float = Field(ge=0, le=10)
    depth: float = Field(ge=0, le=10)
    instruction_following: float = Field(ge=0, le=10)
    readability: float = Field(ge=0, le=10)


class Verdict(BaseModel):
    id: int
    supported: bool


class Verdicts(BaseModel):
    verdicts: list[Verdict]


@dataclass(frozen=True)
class CitationScore:
    pairs: int
    judged: int
    supported: int
    accuracy: float | None  # supported / judged
    effective: int  # distinct supported (url, quote)


def race_score(judgement: RaceJudgement | None) -> dict[str, float] | None:
    """The four dimensions and their mean, 0-100; None (missing) when the judge failed."""
    if judgement is None:
        return None
    scores = {d: getattr(judgement, d) * 10 for d in RACE_DIMENSIONS}
    scores["overall"] = statistics.fmean(scores.values())
    return {k: round(v, 2) for k, v in scores.items()}


def citation_score(pairs: Sequence[CitationPair],
                   verdicts: Sequence[bool | None] | None) -> CitationScore | None:
    if verdicts is None:
        return None
    judged = [(p, v) for p, v in zip(pairs, verdicts) if v is not None]
    supported = [p for p, v in judged if v]
    return CitationScore(len(pairs), len(judged), len(supported),
                         len(supported) / len(judged) if judged else None,
                         len({(p.url, p.quote) for p in supported}))


# --- the judge ---------------------------------------------------------------------------------

JUDGE_MARK = "researchflow quality judge"  # opens every judge prompt: fakes route on it
RACE_SYSTEM = f"""{JUDGE_MARK}: score one research report.
Grade the report written for the task on four dimensions of DeepResearch Bench's RACE, each 0-10:
- comprehensiveness: covers the aspects, facts and viewpoints the task calls for, no major gaps;
- depth: goes beyond restating sources: causes, mechanisms, trade-offs, implications, judgement;
- instruction_following: does what the task asks, in the form it asks (a description, a
  comparison of the named options, or a recommendation with its conditions), in its language;
- readability: clearly organised, fluent, easy to scan, tables or lists where they help.
Anchors: 2 poor, 5 adequate, 8 as good as a strong professional analyst's report, 10 exceptional.
Do not reward length for its own sake; do not check citations (they are judged separately).
Answer with a JSON object: a short "rationale" first, then the four scores."""
CITATION_SYSTEM = f"""{JUDGE_MARK}: check citations against their quotes.
Each item is a sentence from a research report and the quote from the source it cites. An item is
supported when the quote states or directly implies what the sentence claims (paraphrase and
translation are fine); not supported when the quote is unrelated, contradicts the sentence, or only
shares its topic or some words. Judge each item on its own.
Answer with a JSON object {{"verdicts": [{{"id": <item id>, "supported": true|false}}, ...]}},
one verdict per item."""


class Judge:
    """An LLM judge over any ChatModel. Never raises: a failure returns None (score missing)."""

    def __init__(self, model: ChatModel, *, batch_size: int = 8, max_tokens: int = 2_000,
                 attempts: int = 3, sleep: Callable[[float], None] = time.sleep) -> None:
        self.model, self.batch_size, self.max_tokens = model, batch_size, max_tokens
        self.attempts, self.sleep = attempts, sleep
        self.calls = self.input_tokens = self.output_tokens = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def race(self, task: str, markdown: str) -> RaceJudgement | None:
        return self._ask(RACE_SYSTEM, f"Task:\n{task}\n\nReport:\n{markdown[:60_000]}",
                         RaceJudgement)

    def citations(self, pairs: Sequence[CitationPair]) -> list[bool] | None:
        """One verdict per pair, or None when any batch could not be judged."""
        verdicts = [False] * len(pairs)  # no listed quote: nothing supports the sentence
        asked = [i for i, p in enumerate(pairs) if p.url and p.quote]
        for start in range(0, len(asked), self.batch_size):
            chunk = asked[start:start + self.batch_size]
            items = [{"id": k + 1, "sentence": pairs[i].sentence, "quote": pairs[i].quote[:1_500]}
                     for k, i in enumerate(chunk)]
            answer = self._ask(CITATION_SYSTEM, "Items:\n" + json.dumps(items, ensure_ascii=False),
                               Verdicts, lambda v, n=len(chunk): sorted(x.id for x in v.verdicts)
                               == list(range(1, n + 1)))
            if answer is None:
                return None
            for v in answer.verdicts:
                verdicts[chunk[v.id - 1]] = v.supported
        return verdicts

    def _ask(self, system: str, user: str, schema: type[BaseModel],
             check: Callable[[Any], bool] = lambda _: True) -> Any:
        messages = [Message(role="system", content=system), Message(role="user", content=user)]
        for _ in range(2):  # the answer, then one re-ask when it is not valid
            text = self._complete(messages, schema)
            if text is None:
                return None
            start, end = text.find("{"), text.rfind("}")  # past code fences and chatter
            try:
                value = schema.model_validate_json(text[start:end + 1] if start >= 0 else text)
                if check(value):
                    return value
                problem = "it needs exactly one verdict per item id"
            except ValidationError as exc:
                problem = "; ".join(e["msg"] for e in exc.errors()[:3])
            messages += [Message(role="assistant", content=text), Message(
                role="user", content=f"That answer is not valid ({problem}). Answer again with "
                                     "only the JSON object asked for.")]
        return self._failed(f"invalid JSON twice from {self.model.model}")

    def _complete(self, messages: list[Message], schema: type[BaseModel]) -> str | None:
        for attempt in range(self.attempts):
            try:
                done = self.model.complete(messages, max_tokens=self.max_tokens,
                                           json_schema=schema.model_json_schema())
            except (RateLimited, Transient) as exc:  # the SDKs do not retry, and the judge is
                if attempt + 1 < self.attempts:  # outside Prefect's task retries
                    self.sleep(min(30.0, getattr(exc, "retry_after", None) or 2.0 * 2 ** attempt))
                    continue
                return self._failed(str(exc))
            except Signal as exc:
                return self._failed(str(exc))
            with self._lock:
                self.calls += 1
                self.input_tokens += done.usage.input_tokens or 0
                self.output_tokens += done.usage.output_tokens or 0
            return done.text
        return None

    def _failed(self, error: str) -> None:
        with self._lock:
            self.errors.append(error)
        print(f"  judge failed: {error}", file=sys.stderr)


# --- the run -----------------------------------------------------------------------------------

@dataclass
class TopicScore:
    n: int
    lang: str
    intent: str
    topic: str
    report_id: str = ""  # "" when the topic produced no report
    cost_usd: float | None = None  # from the topic's ledger rows (a failed topic costs too)
    race: dict[str, float] | None = None
    citations: CitationScore | None = None
    facts: MeasuredFacts | None = None

    def score(self, judge: Judge, markdown: str) -> None:
        pairs = citation_pairs(markdown)
        self.race = race_score(judge.race(self.topic, markdown))
        self.citations = citation_score(pairs, judge.citations(pairs))
        self.facts = measured_facts(markdown)


HEADER = ("#", "topic", "lang", "intent", "compr.", "depth", "instr.", "read.", "RACE-like",
          "cit. acc.", "judged", "effective cit.", "cit./section", "URLs", "cited sent.", "cost $")


def _fmt(value: float | None, spec: str = ".1f") -> str:
    return "—" if value is None else format(value, spec)


def table(rows: Sequence[TopicScore]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for r in rows:
        race, cit, facts = r.race or {}, r.citations, r.facts
        scores = [*(_fmt(race.get(d)) for d in (*RACE_DIMENSIONS, "overall")),
                  _fmt(cit and cit.accuracy, ".0%"), _fmt(cit and cit.judged, "d"),
                  _fmt(cit and cit.effective, "d"), _fmt(facts and facts.citations_per_section),
                  _fmt(facts and facts.distinct_urls, "d"),
                  _fmt(facts and facts.cited_share, ".0%")]
        short = r.topic[:48] + ("…" if len(r.topic) > 48 else "")
        cells = scores if r.report_id else ["no report"] + ["—"] * 10
        lines.append("| " + " | ".join([str(r.n), short, r.lang, r.intent, *cells,
                                        _fmt(r.cost_usd, ".4f")]) + " |")
    return "\n".join(lines)


def summary(rows: Sequence[TopicScore]) -> dict[str, Any]:
    def mean(values: list[float]) -> float | None:
        return round(statistics.fmean(values), 4) if values else None

    done = [r for r in rows if r.report_id]
    cost = sum(r.cost_usd or 0.0 for r in rows)  # per report: what one costs, failures included
    return {"topics": len(rows), "reports": len(done),
            "race": mean([r.race["overall"] for r in done if r.race]),
            "citation_accuracy": mean([r.citations.accuracy for r in done  # mean of reports'
                                       if r.citations and r.citations.accuracy is not None]),
            "effective_citations": mean([r.citations.effective for r in done if r.citations]),
            "cost_usd_total": round(cost, 6),
            "cost_usd_per_report": round(cost / len(done), 6) if done else None}


def summary_line(s: dict[str, Any]) -> str:
    a = ANCHORS
    return (f"**{s['reports']}/{s['topics']} reports** · RACE-like {_fmt(s['race'])} (absolute; "
            f"published, reference-relative: open_deep_research {a['race_open_deep_research']}, "
            f"{a['best_commercial']} {a['race_best_commercial']}) · citation accuracy "
            f"{_fmt(s['citation_accuracy'], '.0%')} (FACT: {a['citation_accuracy_best']:.0%} at "
            f"best) · effective citations {_fmt(s['effective_citations'])}/report · cost "
            f"${_fmt(s['cost_usd_per_report'], '.4f')}/report (ledger; judge not included)")


def default_judge(research_spec: str) -> str:
    """The research provider's default model (what its key alone picks), else the spec itself."""
    from core.settings import Settings

    key = {"openai": "openai_api_key", "anthropic": "anthropic_api_key",
           "gemini": "gemini_api_key"}.get(research_spec.partition(":")[0])
    return Settings.model_construct(model="auto", **{key: SecretStr("set")}).resolved_model() \
        if key else research_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=len(TOPICS), metavar=f"1-{len(TOPICS)}",
                        choices=range(1, len(TOPICS) + 1), help="how many of the topics to run")
    parser.add_argument("--model", help="research model, provider:model (default: auto from keys)")
    parser.add_argument("--judge-model", help="provider:model (default: the research provider's "
                                              "default model)")
    parser.add_argument("--corpus", help="search this local folder instead of the web")
    parser.add_argument("--db", help="keep the DuckDB store at this path (default: temporary)")
    parser.add_argument("--json", help="also write the scores to this JSON file")
    args = parser.parse_args(argv)

    from core.llm.registry import make_model
    from core.settings import Settings

    settings = Settings.load(model=args.model)
    if not (settings.openai_api_key or settings.anthropic_api_key or settings.gemini_api_key):
        print("error: set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY (and optionally "
              "SERPAPI_API_KEY for web search) to run the quality bench", file=sys.stderr)
        return 2
    research = settings.resolved_model()
    judge_spec = args.judge_model or default_judge(research)
    try:
        judge = Judge(make_model(judge_spec, settings))
    except (ValueError, Signal) as exc:
        print(f"error: judge model {judge_spec}: {exc}", file=sys.stderr)
        return 2
    search = "corpus" if args.corpus else settings.resolved_search()
    if search != "serpapi":
        where = args.corpus or "the bundled CPython docs"
        print(f"note: no SERPAPI_API_KEY: searching the local corpus ({where}), not the web",
              file=sys.stderr)

    work = Path(tempfile.mkdtemp(prefix="rf-bench-quality-"))
    if "prefect" not in sys.modules:  # Prefect reads these once, at import: too late after it
        for key, value in {"PREFECT_HOME": work / "prefect", "PREFECT_LOGGING_LEVEL": "WARNING",
                           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": work / "results",
                           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                           "RESEARCHFLOW_CACHE_DIR": work / "cache"}.items():
            os.environ.setdefault(key, str(value))
    from tasks import contexts
    from core.store import ResultStore, query_readonly
    from flows.batch import research_batch

    chosen = TOPICS[:args.topics]
    # A new batch id every run: new topic ids, so no cached step is served and the ledger's
    # rows for the batch are exactly this run's calls.
    batch = f"quality-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    csv_path, db = work / "topics.csv", Path(args.db or work / "quality.duckdb").resolve()
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows([["topic"], *([text] for _, _, text in chosen)])
    print(f"researching {len(chosen)} topics with {research} (search: {search}), judge "
          f"{judge_spec}, batch {batch}", file=sys.stderr, flush=True)
    state = research_batch(csv_path=str(csv_path), batch_id=batch, model=args.model,
                           search=search, corpus_dir=args.corpus, db_path=str(db),
                           return_state=True)
    if not state.is_completed():
        print(f"note: the batch ended {state.name}; topics without a report are shown so",
              file=sys.stderr)
    contexts.flush()
    store = ResultStore(db)
    # By text: a topic's id carries the batch's edition, which the batch chose.
    reports = {r["topic"]: (r["topic_id"], r["report_id"]) for r in store.list_reports(batch)}
    _, spent = query_readonly(db, "SELECT topic_id, coalesce(sum(cost_usd), 0) FROM ledger "
                                  f"WHERE batch_id = '{batch}' GROUP BY topic_id")
    rows = []
    for n, (lang, intent, text) in enumerate(chosen, start=1):
        topic_id, report_id = reports.get(text, ("", ""))
        rows.append(TopicScore(n, lang, intent, text, report_id, dict(spent).get(topic_id)))
    done = [(r, store.get_report(r.report_id)["markdown"]) for r in rows if r.report_id]
    print(f"judging {len(done)} reports", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda item: item[0].score(judge, item[1]), done))

    totals = summary(rows)
    print(table(rows) + "\n\n" + summary_line(totals))
    print(f"judge {judge_spec}: {judge.calls} calls, {judge.input_tokens:,} tokens in, "
          f"{judge.output_tokens:,} out, {len(judge.errors)} failed (not in the reports' cost)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"batch_id": batch, "model": research, "judge_model": judge_spec, "search": search,
             "rows": [asdict(r) for r in rows], "summary": totals, "anchors": ANCHORS},
            ensure_ascii=False, indent=2), encoding="utf-8")
    if not args.db:
        for leftover in (db, db.with_name(db.name + ".wal")):
            leftover.unlink(missing_ok=True)
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
