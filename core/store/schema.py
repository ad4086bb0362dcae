"""The store's tables and views as they are now, their version, and bringing a file to it.

What it does: `ensure_schema` creates the current schema in an empty file, brings an older file
up to `SCHEMA_VERSION` step by step (the frozen steps of `migrations`, every step inside the
caller's transaction, so a failed migration leaves the file as it was), and refuses a file
newer than this code. `edition_order` is the SQL by which a topic's editions are ordered.

What it does not do: write or read research data (see `results`, `ledger` and `pages`), or
keep the history of older shapes (`migrations` does, with what each version added).

A test checks that a migrated file ends up with exactly the schema a fresh file gets.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from core.store.comments import comment
from core.store.connection import StoreError
from core.store.migrations import MIGRATIONS

SCHEMA_VERSION = 14

# Order matters for counts() and nothing else; meta is bookkeeping, not data.
TABLES = ("runs", "topics", "subquestions", "sources", "topic_sources", "findings",
          "citations", "reports", "ledger", "model_limits", "pages", "searches", "changes")
# Not counted: `call_memo` (core.accounting.memo), answers kept for repeats of billed calls.

_META = "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);"

_TABLES = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ, status VARCHAR NOT NULL, engine VARCHAR, search_backend VARCHAR,
    settings_json JSON, host VARCHAR, pid INTEGER);
-- status/error describe the latest attempt; report_id keeps pointing at the last success.
CREATE TABLE IF NOT EXISTS topics (
    topic_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic VARCHAR NOT NULL,
    status VARCHAR NOT NULL CHECK (status IN ('succeeded', 'failed', 'skipped', 'invalid')),
    error VARCHAR, run_id VARCHAR, report_id VARCHAR, updated_at TIMESTAMPTZ NOT NULL,
    edition VARCHAR);
-- wave 1: the plan's sub-questions; wave n > 1: follow-ups asked after reviewing wave n - 1,
-- with why (the gap) and parent (the idx of the section a follow-up completes; NULL: new).
CREATE TABLE IF NOT EXISTS subquestions (
    topic_id VARCHAR, idx INTEGER, question VARCHAR NOT NULL, queries VARCHAR[],
    wave INTEGER DEFAULT 1, why VARCHAR, parent INTEGER,
    PRIMARY KEY (topic_id, idx));
-- One row per version of a page: source_id names the URL (core.models.Source.source_id),
-- content_hash the text (core.store.source_versions); a version is never overwritten.
CREATE TABLE IF NOT EXISTS sources (
    source_id VARCHAR, url VARCHAR NOT NULL, title VARCHAR, text VARCHAR,
    first_seen TIMESTAMPTZ NOT NULL, last_seen TIMESTAMPTZ NOT NULL, content_hash VARCHAR,
    PRIMARY KEY (source_id, content_hash));
CREATE TABLE IF NOT EXISTS topic_sources (
    topic_id VARCHAR, source_id VARCHAR, content_hash VARCHAR,
    PRIMARY KEY (topic_id, source_id, content_hash));
-- A finding with no claims keeps its raw notes in one row with claim_index -1 and claim NULL.
-- evidence: [{url, title, quote, section, content_hash}], content_hash the version quoted.
CREATE TABLE IF NOT EXISTS findings (
    topic_id VARCHAR, subquestion_index INTEGER, subquestion VARCHAR, claim_index INTEGER,
    claim VARCHAR, confidence VARCHAR, evidence JSON, raw_notes VARCHAR,
    PRIMARY KEY (topic_id, subquestion_index, claim_index));
-- content_hash: the version of the page the quote was taken from (NULL: never stored).
CREATE TABLE IF NOT EXISTS citations (
    report_id VARCHAR, number INTEGER, url VARCHAR NOT NULL, title VARCHAR, quote VARCHAR,
    content_hash VARCHAR, PRIMARY KEY (report_id, number));
CREATE TABLE IF NOT EXISTS reports (
    report_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic_id VARCHAR NOT NULL,
    topic VARCHAR NOT NULL, title VARCHAR, markdown VARCHAR NOT NULL, engine VARCHAR,
    flags VARCHAR[], created_at TIMESTAMPTZ NOT NULL, language VARCHAR, edition VARCHAR,
    previous_report_id VARCHAR, unanswered VARCHAR[], parts_unanswered INTEGER, quotes INTEGER,
    pages INTEGER, sections INTEGER, sections_without_evidence INTEGER, thin_evidence BOOLEAN);
-- What changed in a report since the topic's previous edition (core.reports.editions), one row per
-- item: kind is source_added | source_gone | claim_added | claim_dropped | claim_changed |
-- number_changed.
CREATE TABLE IF NOT EXISTS changes (
    report_id VARCHAR, idx INTEGER, previous_report_id VARCHAR NOT NULL, kind VARCHAR NOT NULL,
    url VARCHAR, title VARCHAR, text VARCHAR, quote VARCHAR, before VARCHAR,
    PRIMARY KEY (report_id, idx));
-- The usage ledger: one row per core.accounting.usage.CallRecord, columns named like its fields,
-- and its kind (core.store.ledger `kind_of`): llm | search | served | fallback. Never deleted
-- by a rerun: a call that was paid for stays paid for. The view llm_calls is its kind 'llm'.
CREATE TABLE IF NOT EXISTS ledger (
    call_id VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
    batch_id VARCHAR NOT NULL,
    topic_id VARCHAR, subquestion_index INTEGER, role VARCHAR NOT NULL,
    provider VARCHAR NOT NULL, model VARCHAR NOT NULL, outcome VARCHAR NOT NULL,
    input_tokens BIGINT, cached_input_tokens BIGINT, output_tokens BIGINT,
    reasoning_tokens BIGINT, tokens_estimated BOOLEAN NOT NULL, latency_ms DOUBLE NOT NULL,
    cost_usd DOUBLE, error VARCHAR, created_at TIMESTAMPTZ NOT NULL);
-- What provider errors said about a model (core.overflow.windows), by normalised model name.
CREATE TABLE IF NOT EXISTS model_limits (
    model VARCHAR PRIMARY KEY, context_window BIGINT, max_output BIGINT, request_budget BIGINT,
    updated_at TIMESTAMPTZ NOT NULL);
-- The web cache (core.store.pages), shared by every run that uses this file. url is the
-- normalised URL; status is 'ok' | 'refused' | 'unavailable' (checked in Python, not by a CHECK,
-- which DuckDB could never drop); bytes is what the fetch downloaded.
CREATE TABLE IF NOT EXISTS pages (
    url VARCHAR PRIMARY KEY, final_url VARCHAR, status VARCHAR NOT NULL, reason VARCHAR,
    title VARCHAR, text VARCHAR, bytes BIGINT, fetched_at TIMESTAMPTZ NOT NULL,
    etag VARCHAR, last_modified VARCHAR);
-- key: a hash of engine, locale params, normalised query and k; results: SearchResult dicts.
CREATE TABLE IF NOT EXISTS searches (
    key VARCHAR PRIMARY KEY, engine VARCHAR, query VARCHAR, results JSON,
    fetched_at TIMESTAMPTZ NOT NULL);
-- The call memo (core.accounting.memo): the answer of one successful billed call (an LLM completion or a
-- search's results, as JSON) under a hash of its request and edition; never the request
-- itself, never a key.
CREATE TABLE IF NOT EXISTS call_memo (
    fingerprint VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, provider VARCHAR NOT NULL,
    model VARCHAR NOT NULL, role VARCHAR, answer JSON NOT NULL,
    created_at TIMESTAMPTZ NOT NULL);
"""

# The sums behind core.accounting.usage.UsageTotals, over `ledger l`; the aliases are its field
# names. Shared by the views and by ledger.usage_totals so both always count the same way.
USAGE_COLUMNS = """
    count(*) FILTER (WHERE l.outcome <> 'fallback') AS calls,
    count(*) FILTER (WHERE l.outcome NOT IN ('ok', 'served', 'fallback')) AS failed_calls,
    count(*) FILTER (WHERE l.role = 'search') AS searches,
    coalesce(sum(l.input_tokens), 0)::BIGINT AS input_tokens,
    coalesce(sum(l.cached_input_tokens), 0)::BIGINT AS cached_input_tokens,
    coalesce(sum(l.output_tokens), 0)::BIGINT AS output_tokens,
    coalesce(sum(l.reasoning_tokens), 0)::BIGINT AS reasoning_tokens,
    coalesce(sum(l.cost_usd), 0)::DOUBLE AS cost_usd,
    count(*) FILTER (WHERE l.outcome = 'ok' AND l.cost_usd IS NULL) AS unpriced_calls,
    count(*) FILTER (WHERE l.outcome = 'served') AS served_calls,
    count(*) FILTER (WHERE l.outcome = 'fallback') AS fallbacks,
    coalesce(string_agg(DISTINCT l.role, ', ' ORDER BY l.role)
             FILTER (WHERE l.outcome = 'fallback'), '') AS fallback_roles"""
# USAGE_COLUMNS' names, and what each is when a topic or batch has no ledger row.
_USAGE_ZEROS = (("calls", "0"), ("failed_calls", "0"), ("searches", "0"), ("input_tokens", "0"),
                ("cached_input_tokens", "0"), ("output_tokens", "0"), ("reasoning_tokens", "0"),
                ("cost_usd", "0.0"), ("unpriced_calls", "0"), ("served_calls", "0"),
                ("fallbacks", "0"), ("fallback_roles", "''"))
_USAGE_OR_ZERO = ", ".join(f"coalesce(s.{name}, {zero}) AS {name}" for name, zero in _USAGE_ZEROS)
# The columns of the compatibility view llm_calls: the ledger's, without its kind.
_LLM_CALLS = ("call_id, run_id, batch_id, topic_id, subquestion_index, role, provider, model, "
              "outcome, input_tokens, cached_input_tokens, output_tokens, reasoning_tokens, "
              "tokens_estimated, latency_ms, cost_usd, error, created_at")


def edition_order(name: str) -> str:
    """SQL for the sort key of the edition name `name` (a column or a `?`), by which a topic's
    editions are ordered ("previous" is the latest edition before this one).

    The name is read as runs of digits and runs of other characters: digits compare by value
    (a run is written as its length, then its digits, leading zeros dropped), the rest as lower
    case text, and a run of digits sorts before other text at the same place. So dates
    (2026-12-03, the default edition, or 2026-9-3) order by date, week-9 comes before week-49
    and v1.9 before v1.10; no edition (NULL, '') comes before every edition. Names with equal
    keys (week-9, Week-09) are ordered by the name itself.
    """
    return (f"list_transform(regexp_extract_all(lower(coalesce({name}, '')), '\\d+|\\D+'), "
            "p -> CASE WHEN regexp_matches(p, '^\\d') THEN "
            "lpad(length(ltrim(p, '0'))::VARCHAR, 3, '0') || ltrim(p, '0') ELSE p END)")


# A topic's reports in edition order, per batch (see `edition_order`).
_EDITION_WINDOW = (f"PARTITION BY batch_id, lower(trim(topic)) ORDER BY "
                   f"{edition_order('edition')}, coalesce(edition, ''), created_at, report_id")

# Views are recreated by every migration (CREATE OR REPLACE), so a later version may redefine them.
_VIEWS = f"""
-- The ledger's LLM calls, as the table of that name held them before version 14 (it also held
-- searches, served repeats and fallbacks, which the ledger's kind now tells apart).
CREATE OR REPLACE VIEW llm_calls AS
SELECT {_LLM_CALLS} FROM ledger WHERE kind = 'llm';

-- Every topic, and every topic the ledger names, with what it spent (0 when nothing: the
-- offline engine, or everything served) and the work it did, counted from what it stored.
CREATE OR REPLACE VIEW usage_by_topic AS
WITH spent AS (
    SELECT l.batch_id, l.topic_id, {USAGE_COLUMNS},
           min(l.created_at) AS first_call_at, max(l.created_at) AS last_call_at
    FROM ledger l GROUP BY l.batch_id, l.topic_id),
asked AS (SELECT topic_id, count(*) AS subquestions FROM subquestions GROUP BY topic_id),
read AS (SELECT topic_id, count(*) AS sources_read FROM topic_sources GROUP BY topic_id),
claimed AS (SELECT topic_id, count(*) AS claims FROM findings WHERE claim_index >= 0
            GROUP BY topic_id)
SELECT coalesce(t.batch_id, s.batch_id) AS batch_id, coalesce(t.topic_id, s.topic_id) AS topic_id,
       t.topic, t.edition, t.status, r.engine, {_USAGE_OR_ZERO},
       coalesce(a.subquestions, 0) AS subquestions, coalesce(rd.sources_read, 0) AS sources_read,
       coalesce(c.claims, 0) AS claims, coalesce(r.quotes, 0) AS quotes,
       s.first_call_at, s.last_call_at
FROM topics t
FULL JOIN spent s ON s.batch_id = t.batch_id AND s.topic_id = t.topic_id
LEFT JOIN reports r ON r.report_id = t.report_id
LEFT JOIN asked a ON a.topic_id = t.topic_id
LEFT JOIN read rd ON rd.topic_id = t.topic_id
LEFT JOIN claimed c ON c.topic_id = t.topic_id;

-- Every batch with topics or ledger rows: what it spent (0 offline) and the work it did.
CREATE OR REPLACE VIEW usage_by_batch AS
WITH spent AS (
    SELECT l.batch_id, {USAGE_COLUMNS},
           min(l.created_at) AS first_call_at, max(l.created_at) AS last_call_at
    FROM ledger l GROUP BY l.batch_id),
work AS (
    SELECT batch_id, count(topic_id) AS topics, sum(subquestions)::BIGINT AS subquestions,
           sum(sources_read)::BIGINT AS sources_read, sum(claims)::BIGINT AS claims,
           sum(quotes)::BIGINT AS quotes
    FROM usage_by_topic GROUP BY batch_id)
SELECT w.batch_id, w.topics, {_USAGE_OR_ZERO}, w.subquestions, w.sources_read, w.claims,
       w.quotes, s.first_call_at, s.last_call_at
FROM work w LEFT JOIN spent s ON s.batch_id = w.batch_id;

-- Roles the extractive engine answered because the model's answers stayed invalid, per topic
-- and role (core.engine.fallback): how often, and the last reason.
CREATE OR REPLACE VIEW fallbacks AS
SELECT l.batch_id, l.topic_id, t.topic, l.role, count(*) AS times,
       arg_max(l.error, l.created_at) AS last_reason, max(l.created_at) AS last_at
FROM ledger l LEFT JOIN topics t ON t.topic_id = l.topic_id
WHERE l.kind = 'fallback'
GROUP BY l.batch_id, l.topic_id, t.topic, l.role;

-- The newest report per topic text: a rerun in the same batch and edition replaces its
-- report, a new edition or a later batch researching the same topic adds one, and only the
-- newest is listed here.
CREATE OR REPLACE VIEW latest_reports AS
SELECT report_id, batch_id, topic, title, language, created_at, engine, edition, unanswered,
       thin_evidence
FROM reports
QUALIFY row_number() OVER (PARTITION BY lower(trim(topic))
                           ORDER BY created_at DESC, report_id) = 1;

-- Every edition of every topic in edition order (n counts them from 1), whatever order they
-- were written in. predecessor_report_id: the edition before it as the store holds it now;
-- stale: its "What changed" was not made against that report as it is now (another edition
-- came between, or the predecessor was written again after it); `researchflow diff REPORT`
-- compares them again.
CREATE OR REPLACE VIEW report_editions AS
WITH ordered AS (
    SELECT report_id, batch_id, topic, edition, previous_report_id, title, created_at,
           row_number() OVER w AS n, lag(report_id) OVER w AS predecessor_report_id,
           lag(created_at) OVER w AS predecessor_written_at
    FROM reports WINDOW w AS ({_EDITION_WINDOW}))
SELECT report_id, batch_id, topic, edition, previous_report_id, title, created_at, n,
       predecessor_report_id,
       (previous_report_id IS DISTINCT FROM predecessor_report_id
        OR coalesce(predecessor_written_at > created_at, false)) AS stale
FROM ordered;

-- Per report of a second or later edition: what changed since the previous one, by kind.
CREATE OR REPLACE VIEW report_changes AS
WITH counted AS (
    SELECT report_id, count(*) AS changes,
           count(*) FILTER (WHERE kind = 'source_added') AS sources_added,
           count(*) FILTER (WHERE kind = 'source_gone') AS sources_gone,
           count(*) FILTER (WHERE kind = 'claim_added') AS claims_added,
           count(*) FILTER (WHERE kind = 'claim_dropped') AS claims_dropped,
           count(*) FILTER (WHERE kind = 'claim_changed') AS claims_changed,
           count(*) FILTER (WHERE kind = 'number_changed') AS numbers_changed
    FROM changes GROUP BY report_id)
SELECT r.report_id, r.previous_report_id, r.batch_id, r.topic, r.edition,
       p.edition AS previous_edition, r.created_at, coalesce(c.changes, 0) AS changes,
       coalesce(c.sources_added, 0) AS sources_added,
       coalesce(c.sources_gone, 0) AS sources_gone,
       coalesce(c.claims_added, 0) AS claims_added,
       coalesce(c.claims_dropped, 0) AS claims_dropped,
       coalesce(c.claims_changed, 0) AS claims_changed,
       coalesce(c.numbers_changed, 0) AS numbers_changed, e.stale
FROM reports r LEFT JOIN reports p ON p.report_id = r.previous_report_id
LEFT JOIN counted c ON c.report_id = r.report_id
JOIN report_editions e ON e.report_id = r.report_id
WHERE r.previous_report_id IS NOT NULL;

-- Every source a report's topic read, in the version it read, with the first reference number
-- citing it (NULL: read but not cited), plus any cited URL that was never stored as a source.
CREATE OR REPLACE VIEW report_sources AS
WITH read AS (
    SELECT r.report_id, s.url, s.title, s.content_hash
    FROM reports r JOIN topic_sources ts ON ts.topic_id = r.topic_id
    JOIN sources s ON s.source_id = ts.source_id AND s.content_hash = ts.content_hash),
cited AS (
    SELECT report_id, url, content_hash, min(number) AS number, min(title) AS title
    FROM citations GROUP BY report_id, url, content_hash)
SELECT coalesce(read.report_id, cited.report_id) AS report_id, cited.number,
       coalesce(read.url, cited.url) AS url, coalesce(read.title, cited.title) AS title,
       coalesce(read.content_hash, cited.content_hash) AS content_hash
FROM read FULL JOIN cited ON cited.report_id = read.report_id AND cited.url = read.url
     AND cited.content_hash = read.content_hash;

-- Every quote of every report, checked against the version of the page it cites: verified
-- when it is there verbatim (runs of whitespace collapsed on both sides), else the reason.
CREATE OR REPLACE VIEW citation_quotes AS
WITH checked AS (
    SELECT c.*, CASE
        WHEN s.content_hash IS NULL THEN 'source not stored'
        WHEN trim(coalesce(c.quote, '')) = '' THEN 'empty quote'
        WHEN NOT contains(regexp_replace(coalesce(s.text, ''), '\\s+', ' ', 'g'),
                          trim(regexp_replace(c.quote, '\\s+', ' ', 'g')))
            THEN 'quote not in source text' END AS reason
    FROM citations c LEFT JOIN sources s ON s.url = c.url AND s.content_hash = c.content_hash)
SELECT c.report_id, r.batch_id, r.topic, r.title AS report_title, c.number, c.url, c.title,
       c.quote, c.content_hash, c.reason IS NULL AS verified, c.reason
FROM checked c JOIN reports r ON r.report_id = c.report_id;

-- Every version of every page: n counts a URL's versions from 1 in the order they were first
-- seen; reports: the reports citing that version.
CREATE OR REPLACE VIEW source_versions AS
WITH citing AS (
    SELECT url, content_hash, list(DISTINCT report_id ORDER BY report_id) AS reports
    FROM citations WHERE content_hash IS NOT NULL GROUP BY url, content_hash)
SELECT s.url, s.content_hash,
       row_number() OVER (PARTITION BY s.source_id ORDER BY s.first_seen, s.content_hash) AS n,
       s.title, length(s.text) AS chars, s.first_seen, s.last_seen,
       coalesce(c.reports, []::VARCHAR[]) AS reports, s.source_id
FROM sources s LEFT JOIN citing c ON c.url = s.url AND c.content_hash = s.content_hash;

-- A topic's latest attempt when it did not succeed (an invalid CSV row included); report_id is
-- an earlier success's report, which a failure never deletes.
CREATE OR REPLACE VIEW failures AS
SELECT batch_id, topic_id, topic, status, error, run_id, updated_at, report_id
FROM topics WHERE status IN ('failed', 'skipped', 'invalid');

-- Every batch with topics or ledger rows: its outcome counts next to what it spent.
CREATE OR REPLACE VIEW cost_by_batch AS
WITH batches AS (SELECT batch_id FROM topics UNION SELECT batch_id FROM ledger),
outcomes AS (
    SELECT batch_id, count(*) AS topics,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           count(*) FILTER (WHERE status = 'skipped') AS skipped,
           count(*) FILTER (WHERE status = 'invalid') AS invalid
    FROM topics GROUP BY batch_id),
written AS (SELECT batch_id, count(*) AS reports FROM reports GROUP BY batch_id)
SELECT b.batch_id, coalesce(o.topics, 0) AS topics, coalesce(w.reports, 0) AS reports,
       coalesce(o.failed, 0) AS failed, coalesce(o.skipped, 0) AS skipped,
       coalesce(u.calls, 0) AS calls, coalesce(u.failed_calls, 0) AS failed_calls,
       coalesce(u.input_tokens, 0) AS input_tokens,
       coalesce(u.output_tokens, 0) AS output_tokens,
       coalesce(u.cost_usd, 0) AS cost_usd,
       coalesce(u.cost_usd, 0) / nullif(w.reports, 0) AS cost_per_report,
       coalesce(u.unpriced_calls, 0) AS unpriced_calls, coalesce(o.invalid, 0) AS invalid
FROM batches b LEFT JOIN outcomes o USING (batch_id) LEFT JOIN written w USING (batch_id)
LEFT JOIN usage_by_batch u USING (batch_id);
"""


def _foreign(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database holds tables or views researchflow did not make."""
    return bool(con.execute(
        "SELECT (SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND table_name <> 'meta') + (SELECT count(*) FROM duckdb_views() "
        "WHERE database_name = current_database() AND NOT internal)").fetchone()[0])


def read_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The file's schema version, or None for a file researchflow never initialised."""
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else int(row[0])


def ensure_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create or upgrade the schema; run it inside the caller's transaction.

    A file at the current version is left alone (nothing is written).
    """
    con.execute(_META)
    version = read_version(con)
    if version == SCHEMA_VERSION:
        return
    if version is None:
        if _foreign(con):
            raise StoreError(f"{path} is a DuckDB database that researchflow did not create "
                             "(it has tables of its own and no schema version); researchflow "
                             "never writes into it: pass another --db")
        con.execute(_TABLES)
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    elif version > SCHEMA_VERSION:
        raise StoreError(f"{path} has schema version {version}, newer than this "
                         f"researchflow understands ({SCHEMA_VERSION}); upgrade it")
    else:
        for step in range(version, SCHEMA_VERSION):
            if step not in MIGRATIONS:
                raise StoreError(f"{path} has schema version {version}, which this "
                                 f"researchflow cannot migrate (no step from {step})")
            MIGRATIONS[step](con)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                    [str(SCHEMA_VERSION)])
    con.execute(_VIEWS)
    comment(con)  # after the views: recreating a view drops its comments
