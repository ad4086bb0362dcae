"""The DuckDB store: runs, topics, sub-questions, sources, findings, citations and reports.

What it does: creates a versioned schema on first open, saves one topic's `ResearchResult` in one
transaction (idempotent per (batch, topic): a rerun replaces that topic's rows), records failed
topics (the error stays in `topics`, never in a report), and answers a few read questions.

What it does not do: hold a connection between calls. DuckDB lets only one process open a file for
writing, so every call opens a fresh connection and closes it, which lets `researchflow query` read
the file from another terminal between writes. Inside one process, writes are serialised by a lock
per file (topic flows save from several threads at once).

Exceptions: `StoreError` > `StoreLockedError` (another process holds the file) and
`ReadOnlyQueryError` (a write attempted through `query_readonly`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
from pydantic import SecretStr

from core.models import ResearchResult, Topic

SCHEMA_VERSION = 1

# Order matters for counts() and nothing else; meta is bookkeeping, not data.
TABLES = ("runs", "topics", "subquestions", "sources", "topic_sources", "findings",
          "citations", "reports")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ, status VARCHAR NOT NULL, engine VARCHAR, search_backend VARCHAR,
    settings_json JSON);
CREATE TABLE IF NOT EXISTS topics (
    topic_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic VARCHAR NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('succeeded', 'failed')), error VARCHAR,
    run_id VARCHAR, report_id VARCHAR, updated_at TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS subquestions (
    topic_id VARCHAR, idx INTEGER, question VARCHAR NOT NULL, queries VARCHAR[],
    PRIMARY KEY (topic_id, idx));
CREATE TABLE IF NOT EXISTS sources (
    source_id VARCHAR PRIMARY KEY, url VARCHAR NOT NULL, title VARCHAR, text VARCHAR,
    first_seen TIMESTAMPTZ NOT NULL, last_seen TIMESTAMPTZ NOT NULL);
CREATE TABLE IF NOT EXISTS topic_sources (
    topic_id VARCHAR, source_id VARCHAR, PRIMARY KEY (topic_id, source_id));
-- A finding with no claims keeps its raw notes in one row with claim_index -1 and claim NULL.
CREATE TABLE IF NOT EXISTS findings (
    topic_id VARCHAR, subquestion_index INTEGER, subquestion VARCHAR, claim_index INTEGER,
    claim VARCHAR, confidence VARCHAR, evidence JSON, raw_notes VARCHAR,
    PRIMARY KEY (topic_id, subquestion_index, claim_index));
CREATE TABLE IF NOT EXISTS citations (
    report_id VARCHAR, number INTEGER, url VARCHAR NOT NULL, title VARCHAR, quote VARCHAR,
    PRIMARY KEY (report_id, number));
CREATE TABLE IF NOT EXISTS reports (
    report_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic_id VARCHAR NOT NULL,
    topic VARCHAR NOT NULL, title VARCHAR, markdown VARCHAR NOT NULL, engine VARCHAR,
    flags VARCHAR[], created_at TIMESTAMPTZ NOT NULL);
"""


class StoreError(Exception):
    """Something about the store file itself went wrong (not a research failure)."""


class StoreLockedError(StoreError):
    """Another process holds the DuckDB file; DuckDB's message names its PID."""


class ReadOnlyQueryError(StoreError):
    """A statement tried to change data through the read-only query path."""


# One lock per resolved file path: threads of one process take turns; DuckDB handles processes.
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _connect(path: Path, *, read_only: bool, lock_timeout: float) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting up to lock_timeout for another process's lock to go away."""
    deadline = time.monotonic() + lock_timeout
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if not _is_lock_conflict(exc):
                if read_only and "does not exist" in str(exc):
                    raise StoreError(f"no researchflow store at {path}") from exc
                raise StoreError(f"cannot open store {path}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"the store {path} is held by another process, so it cannot be opened "
                    f"{'for reading' if read_only else 'for writing'}. DuckDB says: {exc}. "
                    "Wait for that process (another researchflow run or an open DuckDB shell) "
                    "to finish, or stop it, then retry.") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _now() -> datetime:
    return datetime.now(timezone.utc)


_SENSITIVE_NAME = re.compile(r"(_api_key$|secret|password|(^|_)token($|_)|(^|_)key$)", re.I)
_KEY_LIKE_VALUE = re.compile(r"^(sk|pk|rk)-[A-Za-z0-9_\-]{6,}")


def public_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Defensive copy of settings for storage: secrets become set/unset or are dropped.

    Settings.public_dict() already does this; the store repeats it because a caller passing the
    wrong dict must not put a key on disk. "max_output_tokens" is public: only a whole "token"
    word in the name counts as sensitive.
    """
    out: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, SecretStr):
            out[name] = "set" if value.get_secret_value() else "unset"
        elif isinstance(value, dict):
            out[name] = public_settings(value)
        elif _SENSITIVE_NAME.search(str(name)) and value not in ("set", "unset", None):
            continue
        elif isinstance(value, str) and _KEY_LIKE_VALUE.match(value):
            continue
        else:
            out[name] = value
    return out


class ResultStore:
    """A DuckDB file of research results. Safe to share between threads of one process."""

    def __init__(self, path: Path, *, lock_timeout: float = 3.0) -> None:
        self.path = Path(path).expanduser().resolve()
        self.lock_timeout = lock_timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._ensure_schema()

    @contextmanager
    def _connection(self, *, transaction: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        with _lock_for(self.path):
            con = _connect(self.path, read_only=False, lock_timeout=self.lock_timeout)
            try:
                if not transaction:
                    yield con
                    return
                con.execute("BEGIN TRANSACTION")
                try:
                    yield con
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            finally:
                con.close()

    def _ensure_schema(self) -> None:
        with self._connection(transaction=True) as con:
            con.execute(_SCHEMA)
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            elif int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {row[0]}, newer than this "
                                 f"researchflow understands ({SCHEMA_VERSION}); upgrade it")

    def schema_version(self) -> int:
        with self._connection() as con:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    # -- runs -----------------------------------------------------------------------------

    def start_run(self, run_id: str, batch_id: str, engine: str, search_backend: str,
                  settings_public: dict[str, Any]) -> None:
        """Record a run as running. Calling it again for the same run_id (a retry) is harmless."""
        settings_json = json.dumps(public_settings(settings_public), default=str, sort_keys=True)
        with self._connection() as con:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, NULL, 'running', ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET status = 'running', finished_at = NULL, "
                "engine = excluded.engine, search_backend = excluded.search_backend, "
                "settings_json = excluded.settings_json",
                [run_id, batch_id, _now(), engine, search_backend, settings_json])

    def finish_run(self, run_id: str, status: str) -> None:
        with self._connection() as con:
            found = con.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ? "
                                "RETURNING run_id", [status, _now(), run_id]).fetchall()
        if not found:
            raise StoreError(f"finish_run: no run {run_id!r} in {self.path} (start_run first)")

    # -- topics ---------------------------------------------------------------------------

    def save_result(self, result: ResearchResult, *, run_id: str, engine: str) -> str:
        """Store everything one topic produced, replacing an earlier save of the same topic.

        One transaction: a crash leaves either the old rows or the new ones. Sources are shared
        between topics and upserted (latest text wins, first_seen kept). Returns the report_id.
        """
        topic, report = result.topic, result.report
        topic_id, batch_id, now = topic.topic_id, topic.batch_id, _now()
        sources = {s.source_id: s for s in result.sources}  # one upsert per id in a statement
        with self._connection(transaction=True) as con:
            self._delete_topic_rows(con, topic_id, report.report_id)
            con.execute("INSERT INTO topics VALUES (?, ?, ?, 'succeeded', NULL, ?, ?, ?)",
                        [topic_id, batch_id, topic.text, run_id, report.report_id, now])
            if result.plan.subquestions:
                con.executemany("INSERT INTO subquestions VALUES (?, ?, ?, ?)", [
                    [topic_id, sq.index, sq.question, list(sq.queries)]
                    for sq in result.plan.subquestions])
            if sources:
                con.executemany(
                    "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (source_id) DO "
                    "UPDATE SET url = excluded.url, title = excluded.title, "
                    "text = excluded.text, last_seen = excluded.last_seen",
                    [[sid, s.url, s.title, s.text, now, now] for sid, s in sources.items()])
                con.executemany("INSERT INTO topic_sources VALUES (?, ?)",
                                [[topic_id, sid] for sid in sources])
            finding_rows = list(self._finding_rows(result, topic_id))
            if finding_rows:
                con.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                finding_rows)
            if report.citations:
                con.executemany("INSERT INTO citations VALUES (?, ?, ?, ?, ?)", [
                    [report.report_id, c.number, c.url, c.title, c.quote]
                    for c in report.citations])
            con.execute("INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                report.report_id, batch_id, topic_id, report.topic, report.title,
                report.markdown, engine, list(report.flags), now])
        return report.report_id

    @staticmethod
    def _finding_rows(result: ResearchResult, topic_id: str) -> Iterator[list[Any]]:
        for f in result.findings:
            if not f.claims:
                yield [topic_id, f.subquestion_index, f.subquestion, -1, None, None, "[]",
                       f.raw_notes]
            for i, claim in enumerate(f.claims):
                evidence = json.dumps([e.model_dump() for e in claim.evidence])
                yield [topic_id, f.subquestion_index, f.subquestion, i, claim.text,
                       claim.confidence, evidence, f.raw_notes]

    @staticmethod
    def _delete_topic_rows(con: duckdb.DuckDBPyConnection, topic_id: str, report_id: str
                           ) -> None:
        """Remove one topic's own rows (never shared sources), inside the caller's transaction."""
        report_ids = [r[0] for r in con.execute(
            "SELECT report_id FROM reports WHERE topic_id = ?", [topic_id]).fetchall()]
        for rid in {*report_ids, report_id}:
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
        if topic.batch_id != batch_id:
            raise ValueError(f"topic belongs to batch {topic.batch_id!r}, not {batch_id!r}")
        with self._connection(transaction=True) as con:
            con.execute(
                "INSERT INTO topics VALUES (?, ?, ?, 'failed', ?, ?, NULL, ?) "
                "ON CONFLICT (topic_id) DO UPDATE SET status = 'failed', error = excluded.error, "
                "run_id = excluded.run_id, updated_at = excluded.updated_at",
                [topic.topic_id, batch_id, topic.text, error, run_id, _now()])

    # -- readers --------------------------------------------------------------------------

    def topic_status(self, topic_id: str) -> dict[str, Any] | None:
        with self._connection() as con:
            return _one_dict(con.execute(
                "SELECT topic_id, batch_id, topic, status, error, run_id, report_id, updated_at "
                "FROM topics WHERE topic_id = ?", [topic_id]))

    def get_report(self, report_id: str) -> dict[str, Any] | None:
        """A report with its citations (list of dicts ordered by number), or None."""
        with self._connection() as con:
            report = _one_dict(con.execute(
                "SELECT report_id, batch_id, topic_id, topic, title, markdown, engine, flags, "
                "created_at FROM reports WHERE report_id = ?", [report_id]))
            if report is None:
                return None
            report["citations"] = _dicts(con.execute(
                "SELECT number, url, title, quote FROM citations WHERE report_id = ? "
                "ORDER BY number", [report_id]))
        return report

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
            return _dicts(con.execute(sql + " ORDER BY r.created_at DESC, r.report_id", params))

    def counts(self) -> dict[str, int]:
        with self._connection() as con:
            return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}

    def unverified_citations(self, report_id: str) -> list[dict[str, Any]]:
        """Citations whose quote is not verbatim in the stored text of its source.

        Whitespace runs are collapsed on both sides (extraction reflows lines); anything else
        must match exactly. A citation whose url was never stored, or with an empty quote, is
        unverified too; `reason` says which.
        """
        sql = r"""
            SELECT c.number, c.url, c.title, c.quote,
                   CASE WHEN s.source_id IS NULL THEN 'source not stored'
                        WHEN trim(coalesce(c.quote, '')) = '' THEN 'empty quote'
                        ELSE 'quote not in source text' END AS reason
            FROM citations c LEFT JOIN sources s ON s.url = c.url
            WHERE c.report_id = ?
              AND (s.source_id IS NULL OR trim(coalesce(c.quote, '')) = ''
                   OR NOT contains(regexp_replace(coalesce(s.text, ''), '\s+', ' ', 'g'),
                                   trim(regexp_replace(c.quote, '\s+', ' ', 'g'))))
            ORDER BY c.number"""
        with self._connection() as con:
            return _dicts(con.execute(sql, [report_id]))


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _one_dict(cursor: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    rows = _dicts(cursor)
    return rows[0] if rows else None


def query_readonly(path: Path, sql: str, *, lock_timeout: float = 3.0
                   ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run a user's SQL on a read-only connection: (column names, rows).

    The file is opened with read_only=True, so INSERT/UPDATE/DROP are refused by DuckDB itself;
    we translate that refusal into ReadOnlyQueryError with a plain sentence.
    """
    path = Path(path).expanduser().resolve()
    if not path.exists():
        raise StoreError(f"no researchflow store at {path}")
    # The in-process lock matters: DuckDB refuses a read-only connection while this process
    # holds a read-write one to the same file.
    with _lock_for(path):
        con = _connect(path, read_only=True, lock_timeout=lock_timeout)
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            rows = cursor.fetchall() if cursor.description else []
        except duckdb.Error as exc:
            if "read-only mode" in str(exc):
                raise ReadOnlyQueryError(
                    f"queries on {path} are read-only; this statement tries to change data and "
                    f"was refused ({exc})") from exc
            raise StoreError(f"query failed: {exc}") from exc
        finally:
            con.close()
    return columns, rows

