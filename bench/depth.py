"""Benchmark: how deep and how frugal the research is, per provider, from the ledger and the wire.

For each provider (the real openai, anthropic and google-genai SDKs against the loopback
research provider, tests/fakes/research_provider.py) a batch of topics — a description, a
comparison, a recommendation and a Chinese topic — runs through the real Prefect flows over a
small local corpus (English and Chinese pages). It prints, per provider:

- waves run and sub-questions researched per topic (follow-ups from the supervisor included);
- pages read per sub-question;
- condense output tokens per page read, from the usage ledger (the cost of condensing is
  output tokens: retyped sentences before, sentence ids and a short note after);
- calls and cost per topic (ledger);
- the share of prompts that carry today's date, and whether the Chinese topic's prompts ask
  for Chinese;
- the share of citations whose quote is a verbatim substring of the stored source text;
- the report's sections (headings) for each intent.

    python bench/depth.py                         # 3 providers
    python bench/depth.py --providers openai
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

PROVIDERS = ("openai", "anthropic", "gemini")
TOPICS = {"describe": "How does the asyncio event loop handle waiting on sockets",
          "compare": "Threading vs asyncio for waiting on sockets",
          "recommend": "Should I use threading or asyncio for many slow network calls",
          "chinese": "线程和异步IO在等待网络时有什么区别"}

@dataclass
class Row:
    provider: str
    topics: int = 0
    completed: int = 0
    waves: list[int] = field(default_factory=list)
    subquestions: int = 0
    pages: int = 0
    condense_calls: int = 0
    condense_output: int = 0
    calls: int = 0
    cost: float = 0.0
    prompts: int = 0
    dated: int = 0
    zh_prompts: int = 0
    zh_asked: int = 0
    citations: int = 0
    verbatim: int = 0
    headings: dict[str, list[str]] = field(default_factory=dict)


def write_corpus(folder: Path) -> Path:
    from tests.fakes.research_provider import write_pages

    return write_pages(folder, ("waiting on sockets", "memory use", "blocking calls",
                                "scheduling"), sentences=30, chinese=True)


def run_provider(provider: str, work: Path, corpus: Path) -> Row:
    from tasks import contexts
    from core.store import query_readonly
    from flows.batch import research_batch
    from tests.fakes.http import ScriptedServer
    from tests.fakes.research_provider import (SDK_ENV, ResearchProvider, last_user_text,
                                               system_text)

    csv = work / f"{provider}.csv"
    csv.write_text("topic\n" + "".join(f"{t}\n" for t in TOPICS.values()), encoding="utf-8")
    db = work / f"{provider}.duckdb"
    fake = ResearchProvider(provider)
    key_var, url_var, suffix = SDK_ENV[provider]
    contexts.close()
    with ScriptedServer(default=fake) as server:
        os.environ[key_var] = "sk-bench-not-a-real-key"
        os.environ[url_var] = server.url + suffix
        research_batch(csv_path=str(csv), batch_id=provider, model=None, search="corpus",
                       corpus_dir=str(corpus), db_path=str(db), max_concurrency=2,
                       return_state=True)
        os.environ.pop(key_var)
        os.environ.pop(url_var)
    row = Row(provider, topics=len(TOPICS))
    today = datetime.date.today().isoformat()
    for rec in server.requests:
        body = rec.json() or {}
        prompt = system_text(provider, body) + "\n" + last_user_text(provider, body)
        row.prompts += 1
        row.dated += today in prompt
        if TOPICS["chinese"] in prompt or "线程" in prompt:
            row.zh_prompts += 1
            row.zh_asked += bool(re.search(r"Chinese|中文", prompt))

    def one(sql: str) -> list[tuple]:
        return query_readonly(db, sql)[1]

    row.completed = one("SELECT count(*) FROM reports")[0][0]
    columns = {c for (c,) in one("SELECT column_name FROM information_schema.columns "
                                  "WHERE table_name = 'subquestions'")}
    wave = "max(wave)" if "wave" in columns else "1"
    row.waves = [w for (w,) in one(f"SELECT {wave} FROM subquestions GROUP BY topic_id")]
    row.subquestions = one("SELECT count(*) FROM subquestions")[0][0]
    calls, cost = one("SELECT count(*), coalesce(sum(cost_usd), 0) FROM ledger")[0]
    row.calls, row.cost = calls, cost
    n, out = one("SELECT count(*), coalesce(sum(output_tokens), 0) FROM ledger "
                 "WHERE role = 'condense' AND outcome = 'ok'")[0]
    row.condense_calls, row.condense_output = n, out
    row.pages = n  # one condense call per page read: the bench's pages fit one call
    cited = one("SELECT c.quote, s.text FROM citations c JOIN sources s "
                "USING (url, content_hash)")
    row.citations = len(cited)
    row.verbatim = sum(1 for quote, text in cited if quote and quote in (text or ""))
    for (topic, markdown) in one("SELECT topic, markdown FROM reports"):
        kind = next(k for k, t in TOPICS.items() if t == topic)
        row.headings[kind] = re.findall(r"^## (.+)$", markdown, re.M)
    return row


def print_table(rows: list[Row]) -> None:
    head = ("provider", "reports", "waves/topic", "sub-questions/topic", "pages read/sub-q",
            "condense out tokens/page", "calls/topic", "cost/topic", "prompts dated",
            "zh prompts asking Chinese", "citations verbatim")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        per_page = r.condense_output / max(r.pages, 1)
        print(f"| {r.provider} | {r.completed}/{r.topics} | "
              f"{sum(r.waves) / max(len(r.waves), 1):.2f} | {r.subquestions / r.topics:.1f} | "
              f"{r.pages / max(r.subquestions, 1):.2f} | {per_page:.0f} "
              f"({r.condense_output:,} tokens) | "
              f"{r.calls / r.topics:.1f} | ${r.cost / r.topics:.5f} | "
              f"{r.dated}/{r.prompts} | {r.zh_asked}/{r.zh_prompts} | "
              f"{r.verbatim}/{r.citations} |")
    print()
    for r in rows[:1]:
        for kind, headings in sorted(r.headings.items()):
            print(f"report sections ({r.provider}, {kind}): " + " · ".join(headings))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS)
    args = parser.parse_args(argv)
    from bench.workspace import workspace

    work = workspace("rf-bench-depth-")  # before Prefect is imported
    corpus = write_corpus(work / "corpus")
    rows = []
    for provider in args.providers:
        row = run_provider(provider, work, corpus)
        print(f"  {provider}: {row.completed}/{row.topics} reports", file=sys.stderr, flush=True)
        rows.append(row)
    print_table(rows)
    return 0 if all(r.completed == r.topics for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
