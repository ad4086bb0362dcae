"""ResultStore: runs, topics and everything one topic produced, plus the usage ledger's door.

What it does: saves one topic's `ResearchResult` in one transaction (idempotent per (batch,
topic): a rerun replaces that topic's rows), records failed and skipped topics (the reason stays
in `topics`, never in a report), records provider calls, and answers a few read questions.

What it does not do: manage connections. Every call borrows one from `connection.writable`,
which keeps the store's live file open while the process works and publishes the analysts'
read copy at the store's own path (core.store.connection). Inside one process, writes are
serialised by a lock per file (topic flows save from several threads at once).
The same code runs on a DuckLake (many writing processes), through `backend`: every write is a
function of the connection, so a commit that conflicts with another writer can run it again.
The SQL of the ledger lives in `ledger`, the schema in `schema`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

import duckdb

from core.reports.editions import EditionDiff, Snapshot
from core.models import ResearchResult, Topic
from core.secrets import mask
from core.store import ledger, model_limits, runs
from core.store.backend import open_backend
from core.store.report_snapshots import snapshot_from
from core.store.connection import HOLD_SECONDS, LOCK_TIMEOUT, StoreError, dicts, one_dict
from core.store.redaction import public_settings
from core.store.schema import TABLES, edition_order, read_version
from core.store.source_versions import Versions, content_hash, unverified
from core.accounting.usage import CallRecord, UsageTotals


_T = TypeVar("_T")


def _now() -> datetime:
    return datetime.now(timezone.utc)


_ATTEMPT_ROW = "(?, ?, ?, ?, ?, ?, NULL, ?, ?)"
_UPSERT_ATTEMPT = (
    "INSERT INTO topics (topic_id, batch_id, topic, status, error, run_id, report_id, "
    f"updated_at, edition) VALUES {_ATTEMPT_ROW} "
    "ON CONFLICT (topic_id) DO UPDATE SET status = excluded.status, "
    "error = excluded.error, run_id = excluded.run_id, "
    "updated_at = excluded.updated_at")

class ResultStore:
    """Research results in a DuckDB file, or in a DuckLake when `path` is a `ducklake:` target
    (core.store.backend). Safe to share between threads of one process."""

    def __init__(self, path: Path | str, *, lock_timeout: float = LOCK_TIMEOUT,
                 hold_seconds: float = HOLD_SECONDS, data_path: str | None = None) -> None:
        self.lock_timeout = lock_timeout
        self.backend = open_backend(path, lock_timeout=lock_timeout, hold_seconds=hold_seconds,
                                    data_path=data_path)
        self.path = self.backend.path  # None for a DuckLake
        self.backend.ensure_schema()

    @contextmanager
    def _connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for reads."""
        with self.backend.read() as con:
            yield con

    def _write(self, body: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        """body(connection) in one transaction; on a DuckLake it may run more than once."""
        return self.backend.write(body)

    def schema_version(self) -> int:
        with self._connection() as con:
            version = read_version(con)
        if version is None:
            raise StoreError(f"{self.backend.name} has no schema version")
        return version

    # -- runs -----------------------------------------------------------------------------

    def start_run(self, run_id: str, batch_id: str, engine: str, search_backend: str,
                  settings_public: dict[str, Any]) -> None:
        """Record a run as running. Calling it again for the same run_id (a retry) is harmless.
        Runs of this host whose process was killed are marked crashed on the way."""
        settings_json = json.dumps(public_settings(settings_public), default=str, sort_keys=True)
        self._write(lambda con: runs.start(con, run_id, batch_id, engine, search_backend,
                                           settings_json))

    def finish_run(self, run_id: str, status: str) -> None:
        found = self._write(lambda con: runs.finish(con, run_id, status))
        if not found:
            raise StoreError(f"finish_run: no run {run_id!r} in {self.backend.name} "
                             "(start_run first)")

    # -- topics ---------------------------------------------------------------------------

    def save_result(self, result: ResearchResult, *, run_id: str, engine: str,
                    diff: EditionDiff | None = None) -> str:
        """Store everything one topic produced, replacing an earlier save of the same topic
        (in the same edition: another edition's rows are kept).

        One transaction: a crash leaves either the old rows or the new ones. Sources are shared
        between topics and kept per version (url, content hash): a page read again with the
        same text updates its version's title and last_seen, a changed text adds a version,
        and no version is ever overwritten. Citations and each finding's evidence name the
        version their quote came from (core.store.source_versions). The topic's ledger rows
        are never touched. `diff` is what changed since the topic's previous edition (kept in
        `changes`). Returns the report_id.
        """
        topic, report = result.topic, result.report
        topic_id, batch_id, now = topic.topic_id, topic.batch_id, _now()
        # One upsert per version in a statement.
        sources = {(s.source_id, content_hash(s.text)): s for s in result.sources}
        versions = Versions(result.sources)

        def write(con: duckdb.DuckDBPyConnection) -> None:
            self._delete_topic_rows(con, topic_id, report.report_id)
            con.execute("INSERT INTO topics (topic_id, batch_id, topic, status, error, run_id, "
                        "report_id, updated_at, edition) "
                        "VALUES (?, ?, ?, 'succeeded', NULL, ?, ?, ?, ?)",
                        [topic_id, batch_id, topic.text, run_id, report.report_id, now,
                         topic.edition or None])
            if result.plan.subquestions:
                con.executemany(
                    "INSERT INTO subquestions (topic_id, idx, question, queries, wave, why, "
                    "parent) VALUES (?, ?, ?, ?, ?, ?, ?)", [
                        [topic_id, sq.index, sq.question, list(sq.queries), sq.wave,
                         sq.why or None, sq.parent] for sq in result.plan.subquestions])
            if sources:
                con.executemany(
                    "INSERT INTO sources (source_id, url, title, text, first_seen, last_seen, "
                    "content_hash) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (source_id, content_hash) DO "
                    "UPDATE SET title = excluded.title, last_seen = excluded.last_seen",
                    [[sid, s.url, s.title, s.text, now, now, digest]
                     for (sid, digest), s in sources.items()])
                con.executemany("INSERT INTO topic_sources (topic_id, source_id, content_hash) "
                                "VALUES (?, ?, ?)",
                                [[topic_id, sid, digest] for sid, digest in sources])
            finding_rows = list(self._finding_rows(result, topic_id, versions))
            if finding_rows:
                con.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                finding_rows)
            if report.citations:
                con.executemany(
                    "INSERT INTO citations (report_id, number, url, title, quote, content_hash) "
                    "VALUES (?, ?, ?, ?, ?, ?)", [
                        [report.report_id, c.number, c.url, c.title, c.quote,
                         versions.of(c.url, c.quote)] for c in report.citations])
            previous = diff.previous.report_id if diff is not None else None
            con.execute("INSERT INTO reports (report_id, batch_id, topic_id, topic, title, "
                        "markdown, engine, flags, created_at, language, edition, "
                        "previous_report_id, unanswered, parts_unanswered, quotes, pages, "
                        "sections, sections_without_evidence, thin_evidence) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                            report.report_id, batch_id, topic_id, report.topic, report.title,
                            report.markdown, engine, list(report.flags), now, report.language,
                            topic.edition or None, previous, list(report.unanswered),
                            len(report.unanswered), len(report.citations),
                            len({c.url.split("#", 1)[0] for c in report.citations}),
                            report.sections, report.sections_without_evidence,
                            report.thin_evidence])
            if diff is not None and diff.changes:
                con.executemany("INSERT INTO changes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                    [report.report_id, i, previous, c.kind, c.url, c.title, c.text, c.quote,
                     c.before] for i, c in enumerate(diff.changes)])

        self._write(write)
        return report.report_id

    @staticmethod
    def _finding_rows(result: ResearchResult, topic_id: str, versions: Versions
                      ) -> Iterator[list[Any]]:
        for f in result.findings:
            if not f.claims:
                yield [topic_id, f.subquestion_index, f.subquestion, -1, None, None, "[]",
                       f.raw_notes]
            for i, claim in enumerate(f.claims):
                evidence = json.dumps([e.model_dump() | {"content_hash": versions.of(e.url,
                                                                                     e.quote)}
                                       for e in claim.evidence])
                yield [topic_id, f.subquestion_index, f.subquestion, i, claim.text,
                       claim.confidence, evidence, f.raw_notes]

    @staticmethod
    def _delete_topic_rows(con: duckdb.DuckDBPyConnection, topic_id: str, report_id: str
                           ) -> None:
        """Remove one topic's own rows (never shared sources, never the ledger), inside the
        caller's transaction."""
        report_ids = [r[0] for r in con.execute(
            "SELECT report_id FROM reports WHERE topic_id = ?", [topic_id]).fetchall()]
        for rid in {*report_ids, report_id}:
            con.execute("DELETE FROM changes WHERE report_id = ?", [rid])
            con.execute("DELETE FROM citations WHERE report_id = ?", [rid])
            con.execute("DELETE FROM reports WHERE report_id = ?", [rid])
        for table in ("topics", "subquestions", "topic_sources", "findings"):
            con.execute(f"DELETE FROM {table} WHERE topic_id = ?", [topic_id])

    def record_failure(self, batch_id: str, topic: Topic, error: str, run_id: str) -> None:
        """Mark a topic failed with its error; never writes a report.

        A failure does not destroy an earlier success: that topic's report and findings stay and
        topics.report_id keeps pointing at them, while status/error describe the latest attempt.
        A later success overwrites the failure.
        """
        self._record_attempt(batch_id, topic, "failed", error, run_id)

    def record_skipped(self, batch_id: str, topic: Topic, reason: str, run_id: str) -> None:
        """Mark a topic skipped (e.g. over budget) with the reason in `error`; no report.

        Like `record_failure`, an earlier report stays and topics.report_id keeps pointing at it.
        """
        self._record_attempt(batch_id, topic, "skipped", reason, run_id)

    def record_invalid(self, batch_id: str, topic_id: str, text: str, error: str,
                       run_id: str) -> None:
        """Mark a CSV row that could not become a topic `invalid`, with the reason in `error`.

        `text` is its topic cell as far as it could be read. Like `record_failure`, an
        earlier report of the same topic stays and topics.report_id keeps pointing at it.
        """
        self._upsert_attempt(topic_id, batch_id, text, "invalid", error, run_id)

    def record_invalid_many(self, batch_id: str, rows: Sequence[tuple[str, str, str]],
                            run_id: str, *, chunk: int = 2_000) -> None:
        """`record_invalid` for many rows (topic_id, text, error): `chunk` rows a transaction,
        so a CSV of 100,000 bad rows is a few dozen writes, not 100,000 (70 rows/s)."""
        now = _now()
        for start in range(0, len(rows), chunk):
            params = [[topic_id, batch_id, text, "invalid", mask(error), run_id, now, None]
                      for topic_id, text, error in rows[start:start + chunk]]
            if self.backend.path is None:  # a lake writes many rows of a MERGE its own way
                self._write(lambda con, params=params: con.executemany(_UPSERT_ATTEMPT, params))
                continue
            # One statement of many rows: DuckDB's executemany runs an upsert row by row.
            many = _UPSERT_ATTEMPT.replace(f"VALUES {_ATTEMPT_ROW}",
                                           "VALUES " + ", ".join([_ATTEMPT_ROW] * len(params)))
            flat = [value for row in params for value in row]
            self._write(lambda con, many=many, flat=flat: con.execute(many, flat))

    def _record_attempt(self, batch_id: str, topic: Topic,
                        status: Literal["failed", "skipped"], error: str, run_id: str) -> None:
        if topic.batch_id != batch_id:
            raise ValueError(f"topic belongs to batch {topic.batch_id!r}, not {batch_id!r}")
        self._upsert_attempt(topic.topic_id, batch_id, topic.text, status, error, run_id,
                             topic.edition or None)

    def _upsert_attempt(self, topic_id: str, batch_id: str, text: str, status: str,
                        error: str, run_id: str, edition: str | None = None) -> None:
        now = _now()
        self._write(lambda con: con.execute(
            _UPSERT_ATTEMPT, [topic_id, batch_id, text, status, mask(error), run_id, now,
                              edition]))

    # -- usage ledger ---------------------------------------------------------------------

    def record_calls(self, records: Sequence[CallRecord]) -> None:
        """Append provider calls to the ledger in one transaction; a call_id already stored is
        kept as it was, so writing the same records twice changes nothing."""
        if not records:
            return
        self._write(lambda con: ledger.insert_calls(con, records))

    def usage(self, *, run_id: str | None = None, batch_id: str | None = None,
              topic_id: str | None = None, report_id: str | None = None) -> UsageTotals:
        """Totals over the ledger rows matching every filter given; no filter: everything.

        report_id means the calls of that report's topic in that report's batch, by any run.
        """
        with self._connection() as con:
            return ledger.usage_totals(con, run_id=run_id, batch_id=batch_id,
                                       topic_id=topic_id, report_id=report_id)

    def spent_usd(self, *, run_id: str, topic_id: str | None = None) -> float:
        """Known dollars spent by one run (or one topic in it); unpriced calls count as 0."""
        with self._connection() as con:
            return ledger.spent_usd(con, run_id=run_id, topic_id=topic_id)

    # -- readers --------------------------------------------------------------------------

    def topic_status(self, topic_id: str) -> dict[str, Any] | None:
        with self._connection() as con:
            return one_dict(con.execute(
                "SELECT topic_id, batch_id, topic, status, error, run_id, report_id, updated_at "
                "FROM topics WHERE topic_id = ?", [topic_id]))

    def get_report(self, report_id: str) -> dict[str, Any] | None:
        """A report with its citations (list of dicts ordered by number) and "usage" (a
        UsageTotals over the calls of its topic in its batch), or None."""
        with self._connection() as con:
            report = one_dict(con.execute(
                "SELECT report_id, batch_id, topic_id, topic, title, markdown, engine, flags, "
                "unanswered, created_at FROM reports WHERE report_id = ?", [report_id]))
            if report is None:
                return None
            report["citations"] = dicts(con.execute(
                "SELECT number, url, title, quote FROM citations WHERE report_id = ? "
                "ORDER BY number", [report_id]))
            report["usage"] = ledger.usage_totals(con, batch_id=report["batch_id"],
                                                  topic_id=report["topic_id"])
        return report

    def previous_edition(self, topic: Topic) -> Snapshot | None:
        """The snapshot of the topic's predecessor: its report in the latest edition of its
        batch ordered before `topic.edition` (core.store.schema `edition_order`), whatever
        order the runs were written in, so a backfill compares with the edition before it.
        None: the topic has none, or belongs to no edition."""
        if not topic.edition:
            return None
        with self._connection() as con:
            row = con.execute(
                f"SELECT report_id FROM reports WHERE batch_id = ? AND "
                f"lower(trim(topic)) = lower(trim(?)) AND ({edition_order('edition')}, "
                f"coalesce(edition, '')) < ({edition_order('?')}, ?) "
                f"ORDER BY {edition_order('edition')} DESC, coalesce(edition, '') DESC "
                "LIMIT 1", [topic.batch_id, topic.text, topic.edition, topic.edition]
            ).fetchone()
            return None if row is None else snapshot_from(con, row[0])

    def change_count(self, report_id: str) -> int | None:
        """How many changes a report lists since the previous edition; None: it is a topic's
        first edition (or an unknown report)."""
        with self._connection() as con:
            row = con.execute("SELECT previous_report_id, (SELECT count(*) FROM changes c "
                              "WHERE c.report_id = r.report_id) FROM reports r "
                              "WHERE report_id = ?", [report_id]).fetchone()
        return None if row is None or row[0] is None else int(row[1])

    def snapshot(self, report_id: str) -> Snapshot | None:
        """What a stored report rests on (core.reports.editions), or None for an unknown id."""
        with self._connection() as con:
            return snapshot_from(con, report_id)

    def list_reports(self, batch_id: str | None = None) -> list[dict[str, Any]]:
        """Report summaries (no markdown), newest first, optionally for one batch."""
        sql = ("SELECT r.report_id, r.batch_id, r.topic_id, r.topic, r.title, r.engine, "
               "r.flags, r.created_at, (SELECT count(*) FROM citations c "
               "WHERE c.report_id = r.report_id) AS n_citations FROM reports r")
        params: list[Any] = []
        if batch_id is not None:
            sql += " WHERE r.batch_id = ?"
            params.append(batch_id)
        with self._connection() as con:
            return dicts(con.execute(sql + " ORDER BY r.created_at DESC, r.report_id", params))

    def counts(self) -> dict[str, int]:
        with self._connection() as con:
            return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}

    def unverified_citations(self, report_id: str) -> list[dict[str, Any]]:
        """Citations whose quote is not verbatim in the version of the page they cite.

        Whitespace runs are collapsed on both sides (extraction reflows lines); anything else
        must match exactly. A citation whose page was never stored, or with an empty quote, is
        unverified too; `reason` says which (core.store.source_versions `unverified`).
        """
        with self._connection() as con:
            return unverified(con, report_id)

    # -- model limits learned from provider errors --------------------------------------------

    def remember_limits(self, model: str, *, context_window: int | None = None,
                        max_output: int | None = None, request_budget: int | None = None) -> None:
        """Keep what an error said about `model` (its normalised name) for later runs."""
        self._write(lambda con: model_limits.remember(
            con, model, context_window=context_window, max_output=max_output,
            request_budget=request_budget))

    def learned_limits(self) -> dict[str, dict[str, int]]:
        """model -> {"context_window"|"max_output"|"request_budget": tokens}."""
        with self._connection() as con:
            return model_limits.remembered(con)

