"""A CSV researched on several days over a corpus that changes: shared by bench/editions.py and
tests.

Two topics run through the real batch flow and the real openai SDK against the loopback research
provider, over a corpus of pages (tests/fakes/research_provider.py `write_pages`). Each `day`
is one batch run with its own edition (when the flow takes one). Between days the corpus can be
edited: a number changed on one page, a page added, a page removed.
"""

from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.http import ScriptedServer
from tests.fakes.research_provider import (SDK_ENV, TEST_MODELS, ResearchProvider, write_batch,
                                          write_pages)

SUBJECTS = ("waiting on sockets", "blocking calls", "memory use")
TOPICS = ("Threading or asyncio for waiting on sockets",
          "Threading or asyncio for blocking calls")


@dataclass(frozen=True)
class Day:
    """What one batch run (one edition) cost and stored."""

    edition: str
    state: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    reports: int  # reports stored for the batch after this day, every edition counted
    report_ids: tuple[str, ...]  # this day's reports, one per topic
    changed: tuple[str, ...] = ()  # the batch table's "changed" column, per topic
    repeated: int = 0  # successful provider calls repeated byte for byte (target 0)
    # The calls paid for (ledger outcome "ok"), one row per (topic, sub-question, role): which
    # steps this edition computed again (sub-question None: the topic's plan, review, report).
    paid: tuple[tuple[str, int | None, str, int], ...] = field(
        default=(), repr=False)
    # The LLM tokens (in + out) of those calls, by role, from the ledger.
    tokens_by_role: tuple[tuple[str, int], ...] = field(default=(), repr=False)
    # The sub-questions (topic, index) on a changed page's path: those whose notes hold a page
    # edited since the day before, and those that paid to condense one.
    on_path: frozenset[tuple[str, int]] = field(default=frozenset(), repr=False)

    def steps(self) -> dict[str, int]:
        """Calls paid for, by role (plan, choose, condense, queries, compress, review, report)."""
        counted: dict[str, int] = {}
        for _, _, role, n in self.paid:
            counted[role] = counted.get(role, 0) + n
        return counted

    def off_path(self, pages_changed: int = 1) -> int:
        """Calls paid for that no changed page explains. A sub-question that read a changed page
        may condense that page again (at most one call per page changed) and, when its notes
        changed, decide its searches and compress again; a topic with such a sub-question is
        reviewed and written again. Anything else (a plan, a choice of pages, an unchanged page
        condensed, a sub-question off the page's path paying for its other steps) is waste."""
        touched = set(self.on_path) | {(t, i) for t, i, role, _ in self.paid
                                       if role == "condense"}
        topics = {t for t, _ in touched}
        waste = 0
        for topic, index, role, n in self.paid:
            if role in ("queries", "compress", "checkpoint"):
                waste += 0 if (topic, index) in touched else n
            elif role in ("review", "report"):
                waste += 0 if topic in topics else n
            elif role == "condense":
                waste += max(0, n - pages_changed)  # more: an unchanged page condensed again
            else:  # plan, choose, rewrite: nothing they read changed
                waste += n
        return waste

    def share_of(self, first: "Day") -> float:
        """This day's LLM tokens as a share of `first`'s."""
        total = first.input_tokens + first.output_tokens
        return (self.input_tokens + self.output_tokens) / total if total else 0.0


class EditionsScenario:
    """`by_subject`: the provider chooses, from the search results, only the pages whose title
    names the sub-question's subject (as a model reading titles and snippets would), so each
    topic reads its own page and an edited page lies on one topic's path. Without it every
    sub-question reads every page its searches return (all three: each names threading and
    asyncio), and an edited page lies on every path."""

    def __init__(self, work: Path, *, by_subject: bool = False) -> None:
        self.work = work
        self.corpus, self.csv, self.db = write_batch(work, SUBJECTS, TOPICS, sentences=20)
        self.provider = ResearchProvider("openai", choose_by_subject=by_subject)
        self.batch_id = "nightly"
        # One provider address for every day: base URLs are part of every cache key.
        self.server = ScriptedServer(default=self.provider)
        self.edited: set[str] = set()  # pages edited since the last day (their file names)

    def __enter__(self) -> "EditionsScenario":
        self.server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.server.__exit__(*exc)

    # -- the corpus between days ------------------------------------------------------------

    def page(self, subject: str) -> Path:
        return self.corpus / (re.sub(r"\W+", "-", subject.lower()) + ".md")

    def edit_number(self, subject: str, old: int, new: int) -> None:
        """Change one figure on a subject's page ("... for {old} milliseconds ...")."""
        path = self.page(subject)
        text = path.read_text(encoding="utf-8")
        needle = f"for {old} milliseconds"
        if needle not in text:
            raise ValueError(f"{path.name} has no {needle!r}")
        path.write_text(text.replace(needle, f"for {new} milliseconds", 1), encoding="utf-8")
        self.edited.add(path.name)

    def edit_words(self, subject: str, example: int, old: str, new: str) -> None:
        """Reword one sentence of a subject's page (example `example`'s), its figure kept."""
        path = self.page(subject)
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        at = next((n for n, line in enumerate(lines) if f" example {example} " in line), None)
        if at is None or old not in lines[at]:
            raise ValueError(f"{path.name}: example {example} has no {old!r}")
        lines[at] = lines[at].replace(old, new, 1)
        path.write_text("".join(lines), encoding="utf-8")
        self.edited.add(path.name)

    def add_page(self, subject: str, sentences: int = 20) -> Path:
        write_pages(self.corpus, (subject,), sentences=sentences)
        return self.page(subject)

    def remove_page(self, subject: str) -> None:
        self.page(subject).unlink()

    # -- one day ----------------------------------------------------------------------------

    def parameters(self, edition: str) -> dict:
        from flows.batch import research_batch

        params = dict(csv_path=str(self.csv), batch_id=self.batch_id,
                      model=TEST_MODELS["openai"], search="corpus",
                      corpus_dir=str(self.corpus), db_path=str(self.db), max_concurrency=2)
        if "edition" in inspect.signature(research_batch.fn).parameters:
            params["edition"] = edition
        return params

    def day(self, edition: str) -> Day:
        from tasks import contexts
        from flows.batch import research_batch

        contexts.close()
        key_var, url_var, suffix = SDK_ENV["openai"]
        before = (self.provider.successes, self.provider.input_tokens,
                  self.provider.output_tokens, self._cost(), self.provider.repeated_successes)
        env = {key_var: "sk-editions-not-a-real-key", url_var: self.server.url + suffix}
        os.environ.update(env)
        try:
            state = research_batch(**self.parameters(edition), return_state=True)
        finally:
            for name in env:
                os.environ.pop(name, None)
        contexts.close()
        table = state.result(raise_on_failure=False)
        rows = table if isinstance(table, list) else []
        run_id = str(state.state_details.flow_run_id)
        return Day(edition=edition, state=state.type.value,
                   calls=self.provider.successes - before[0],
                   input_tokens=self.provider.input_tokens - before[1],
                   output_tokens=self.provider.output_tokens - before[2],
                   cost_usd=round(self._cost() - before[3], 6), reports=self._reports(),
                   report_ids=tuple(r["report_id"] for r in rows),
                   changed=tuple(r.get("changed", "") for r in rows),
                   repeated=self.provider.repeated_successes - before[4],
                   paid=self._paid(run_id), tokens_by_role=self._tokens(run_id),
                   on_path=self._on_path())

    def _cost(self) -> float:
        if not self.db.exists():
            return 0.0
        return float(self._one("SELECT coalesce(sum(cost_usd), 0) FROM ledger"))

    def _paid(self, run_id: str) -> tuple[tuple[str, int | None, str, int], ...]:
        if not self.db.exists():
            return ()
        from core.store import query_readonly

        _, rows = query_readonly(self.db, "SELECT t.topic, c.subquestion_index, c.role, "
                                 "count(*) FROM ledger c LEFT JOIN topics t USING (topic_id) "
                                 "WHERE c.run_id = ? AND c.outcome = 'ok' GROUP BY ALL "
                                 "ORDER BY ALL", [run_id])
        return tuple((topic or "", index, role, int(n)) for topic, index, role, n in rows)

    def _on_path(self) -> frozenset[tuple[str, int]]:
        """The sub-questions whose notes hold a page edited since the last day (then forgotten)."""
        edited, self.edited = self.edited, set()
        if not edited or not self.db.exists():
            return frozenset()
        from core.store import query_readonly

        _, rows = query_readonly(self.db, "SELECT DISTINCT t.topic, f.subquestion_index, "
                                 "f.raw_notes FROM findings f JOIN topics t USING (topic_id)")
        return frozenset((topic, int(index)) for topic, index, notes in rows
                         if any(f"/{name}>" in (notes or "") for name in edited))

    def _tokens(self, run_id: str) -> tuple[tuple[str, int], ...]:
        if not self.db.exists():
            return ()
        from core.store import query_readonly

        _, rows = query_readonly(self.db, "SELECT role, sum(input_tokens + output_tokens) FROM "
                                 "llm_calls WHERE run_id = ? AND outcome = 'ok' GROUP BY ALL "
                                 "ORDER BY ALL", [run_id])
        return tuple((role, int(n)) for role, n in rows)

    def _reports(self) -> int:
        return int(self._one("SELECT count(*) FROM reports"))

    def _one(self, sql: str):
        from core.store import query_readonly

        _, rows = query_readonly(self.db, sql)
        return rows[0][0]

    def report(self, report_id: str) -> dict:
        from core.store import ResultStore

        return ResultStore(self.db).get_report(report_id) or {}
