"""The store's tables and views, their version, and the migrations from older versions.

What it does: `ensure_schema` creates the current schema in an empty file, brings an older file
up to `SCHEMA_VERSION` step by step (every step inside the caller's transaction, so a failed
migration leaves the file as it was), and refuses a file newer than this code.

What it does not do: write or read research data (see `results`, `ledger` and `pages`).

A migration is frozen once released: it spells out the shape of its own version rather than
reusing `_TABLES`, so a later change to the current schema cannot change what an old step does.
A test checks that a migrated file ends up with exactly the schema a fresh file gets.

Version history:
  1  runs, topics (status succeeded|failed), subquestions, sources, topic_sources, findings,
     citations, reports
  2  topics.status also 'skipped'; the usage ledger `llm_calls` (one row per `CallRecord`);
     views `usage_by_topic` and `usage_by_batch`
  3  `model_limits`: context windows, output caps and per-request budgets that provider errors
     taught, per model, so the next run starts knowing them
  4  research waves: `subquestions.wave` (1: the plan's; 2+: the supervisor's follow-ups),
     `subquestions.why` (the gap a follow-up fills) and `subquestions.parent` (the section it
     completes); `reports.language`
  5  the web cache: `pages` (one fetch per normalised URL: its text, or why it was refused or
     unavailable) and `searches` (one search per engine, locale, normalised query and k), each
     with fetched_at so a reader can tell a fresh entry from a stale one (core.store.pages)
  6  `runs.host` and `runs.pid`: the process running it, so a run whose process was killed is
     found and marked 'crashed' instead of staying 'running' forever
  7  views for the common questions, no table changes: `latest_reports`, `report_sources`,
     `citation_quotes`, `failures`, `cost_by_batch` (a file at the current version is never
     written, so an older file gets new views only through a version step)
  8  topics.status also 'invalid': a CSV row that could not become a topic, with its reason in
     `error`; `failures` lists them and `cost_by_batch` counts them (`invalid`)
  9  editions: `topics.edition` and `reports.edition` (a scheduled batch's run: its date by
     default), `reports.previous_report_id` (the topic's previous edition), `changes` (what
     changed since it, one row per item, core.reports.editions); `pages.etag` and
     `pages.last_modified` for conditional fetches; views `report_editions` and
     `report_changes`, `latest_reports` gains `edition`
  10 the call memo `call_memo` (core.accounting.memo): one answer per fingerprint of a successful billed
     request, so a retry or rerun is served it instead of paying again; the ledger's
     outcome 'served' (cost 0) and the usage sums' `served_calls`
  11 no table changes: the ledger's outcome 'fallback' (a role the extractive engine answered
     because the model's answers stayed invalid, core.engine.fallback) is not a call; the usage
     sums gain `fallbacks` and `fallback_roles`, and the view `fallbacks` lists them per topic
     and role
  12 `reports.unanswered`: the parts of the topic no evidence answered (core.relevance.gate),
     as the report's header names them; `latest_reports` shows them
  13 versioned sources (core.store.source_versions): `sources` keeps one row per (url, content
     hash), keyed (source_id, content_hash), so a changed page adds a version instead of
     overwriting the text earlier editions quoted; `topic_sources.content_hash` (the version a
     topic read), `citations.content_hash` and a `content_hash` in each item of
     `findings.evidence` (the version quoted); existing rows become one version per URL.
     Views: `source_versions` (each version, the reports citing it); `citation_quotes` gains
     `content_hash`, `verified` and `reason`; `report_sources` reads the version each report
     read; `report_editions` is ordered by the edition's name (`edition_order`) and gains
     `predecessor_report_id` and `stale`, which `report_changes` shows too
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb

from core.store.connection import StoreError

SCHEMA_VERSION = 13

# Order matters for counts() and nothing else; meta is bookkeeping, not data.
TABLES = ("runs", "topics", "subquestions", "sources", "topic_sources", "findings",
          "citations", "reports", "llm_calls", "model_limits", "pages", "searches", "changes")
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
    previous_report_id VARCHAR, unanswered VARCHAR[]);
-- What changed in a report since the topic's previous edition (core.reports.editions), one row per
-- item: kind is source_added | source_gone | claim_added | claim_dropped | claim_changed |
-- number_changed.
CREATE TABLE IF NOT EXISTS changes (
    report_id VARCHAR, idx INTEGER, previous_report_id VARCHAR NOT NULL, kind VARCHAR NOT NULL,
    url VARCHAR, title VARCHAR, text VARCHAR, quote VARCHAR, before VARCHAR,
    PRIMARY KEY (report_id, idx));
-- The usage ledger: one row per core.accounting.usage.CallRecord, columns named like its fields. Never
-- deleted by a rerun: a call that was paid for stays paid for.
CREATE TABLE IF NOT EXISTS llm_calls (
    call_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, batch_id VARCHAR NOT NULL,
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

# The sums behind core.accounting.usage.UsageTotals, over `llm_calls l`; the aliases are its field names.
# Shared by the views and by ledger.usage_totals so both always count the same way.
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
CREATE OR REPLACE VIEW usage_by_topic AS
SELECT l.batch_id, l.topic_id, t.topic, {USAGE_COLUMNS},
       min(l.created_at) AS first_call_at, max(l.created_at) AS last_call_at
FROM llm_calls l LEFT JOIN topics t ON t.topic_id = l.topic_id
GROUP BY l.batch_id, l.topic_id, t.topic;

CREATE OR REPLACE VIEW usage_by_batch AS
SELECT l.batch_id, count(DISTINCT l.topic_id) AS topics, {USAGE_COLUMNS},
       min(l.created_at) AS first_call_at, max(l.created_at) AS last_call_at
FROM llm_calls l
GROUP BY l.batch_id;

-- Roles the extractive engine answered because the model's answers stayed invalid, per topic
-- and role (core.engine.fallback): how often, and the last reason.
CREATE OR REPLACE VIEW fallbacks AS
SELECT l.batch_id, l.topic_id, t.topic, l.role, count(*) AS times,
       arg_max(l.error, l.created_at) AS last_reason, max(l.created_at) AS last_at
FROM llm_calls l LEFT JOIN topics t ON t.topic_id = l.topic_id
WHERE l.outcome = 'fallback'
GROUP BY l.batch_id, l.topic_id, t.topic, l.role;

-- The newest report per topic text: a rerun in the same batch and edition replaces its
-- report, a new edition or a later batch researching the same topic adds one, and only the
-- newest is listed here.
CREATE OR REPLACE VIEW latest_reports AS
SELECT report_id, batch_id, topic, title, language, created_at, engine, edition, unanswered
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
WITH batches AS (SELECT batch_id FROM topics UNION SELECT batch_id FROM llm_calls),
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


def _v1_to_v2(con: duckdb.DuckDBPyConnection) -> None:
    """topics.status gains 'skipped'; the usage ledger appears. Frozen: the v2 shapes."""
    # DuckDB cannot drop a CHECK constraint, so the table is rebuilt and its rows copied.
    con.execute("CREATE TEMP TABLE topics_v1 AS SELECT * FROM topics")
    con.execute("DROP TABLE topics")
    con.execute("""
        CREATE TABLE topics (
            topic_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic VARCHAR NOT NULL,
            status VARCHAR NOT NULL CHECK (status IN ('succeeded', 'failed', 'skipped')),
            error VARCHAR, run_id VARCHAR, report_id VARCHAR, updated_at TIMESTAMPTZ NOT NULL)""")
    con.execute("INSERT INTO topics BY NAME SELECT * FROM topics_v1")
    con.execute("DROP TABLE topics_v1")
    con.execute("""
        CREATE TABLE llm_calls (
            call_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, batch_id VARCHAR NOT NULL,
            topic_id VARCHAR, subquestion_index INTEGER, role VARCHAR NOT NULL,
            provider VARCHAR NOT NULL, model VARCHAR NOT NULL, outcome VARCHAR NOT NULL,
            input_tokens BIGINT, cached_input_tokens BIGINT, output_tokens BIGINT,
            reasoning_tokens BIGINT, tokens_estimated BOOLEAN NOT NULL,
            latency_ms DOUBLE NOT NULL, cost_usd DOUBLE, error VARCHAR,
            created_at TIMESTAMPTZ NOT NULL)""")


def _v2_to_v3(con: duckdb.DuckDBPyConnection) -> None:
    """Learned model limits are remembered. Frozen: the v3 shape."""
    con.execute("""
        CREATE TABLE model_limits (
            model VARCHAR PRIMARY KEY, context_window BIGINT, max_output BIGINT,
            request_budget BIGINT, updated_at TIMESTAMPTZ NOT NULL)""")


def _v3_to_v4(con: duckdb.DuckDBPyConnection) -> None:
    """Waves and the report's language. Frozen: the v4 columns. Existing sub-questions were
    all the plan's (wave 1)."""
    con.execute("ALTER TABLE subquestions ADD COLUMN wave INTEGER DEFAULT 1")
    con.execute("ALTER TABLE subquestions ADD COLUMN why VARCHAR")
    con.execute("ALTER TABLE subquestions ADD COLUMN parent INTEGER")
    con.execute("ALTER TABLE reports ADD COLUMN language VARCHAR")


def _v4_to_v5(con: duckdb.DuckDBPyConnection) -> None:
    """The web cache: fetched pages and search results. Frozen: the v5 shapes."""
    con.execute("""
        CREATE TABLE pages (
            url VARCHAR PRIMARY KEY, final_url VARCHAR, status VARCHAR NOT NULL,
            reason VARCHAR, title VARCHAR, text VARCHAR, bytes BIGINT,
            fetched_at TIMESTAMPTZ NOT NULL)""")
    con.execute("""
        CREATE TABLE searches (
            key VARCHAR PRIMARY KEY, engine VARCHAR, query VARCHAR, results JSON,
            fetched_at TIMESTAMPTZ NOT NULL)""")


def _v5_to_v6(con: duckdb.DuckDBPyConnection) -> None:
    """The process behind each run. Frozen: the v6 columns; older runs have none."""
    con.execute("ALTER TABLE runs ADD COLUMN host VARCHAR")
    con.execute("ALTER TABLE runs ADD COLUMN pid INTEGER")


def _v6_to_v7(con: duckdb.DuckDBPyConnection) -> None:
    """Views only, which `ensure_schema` recreates after the last step: nothing to do."""


def _v7_to_v8(con: duckdb.DuckDBPyConnection) -> None:
    """topics.status gains 'invalid'. Frozen: the v8 shape of topics."""
    # DuckDB cannot drop a CHECK constraint, so the table is rebuilt and its rows copied
    # (the views that read it are dropped first and recreated after the last step).
    for view in ("usage_by_topic", "failures", "cost_by_batch"):
        con.execute(f"DROP VIEW IF EXISTS {view}")
    con.execute("CREATE TEMP TABLE topics_v7 AS SELECT * FROM topics")
    con.execute("DROP TABLE topics")
    con.execute("""
        CREATE TABLE topics (
            topic_id VARCHAR PRIMARY KEY, batch_id VARCHAR NOT NULL, topic VARCHAR NOT NULL,
            status VARCHAR NOT NULL
                CHECK (status IN ('succeeded', 'failed', 'skipped', 'invalid')),
            error VARCHAR, run_id VARCHAR, report_id VARCHAR, updated_at TIMESTAMPTZ NOT NULL)""")
    con.execute("INSERT INTO topics BY NAME SELECT * FROM topics_v7")
    con.execute("DROP TABLE topics_v7")


def _v8_to_v9(con: duckdb.DuckDBPyConnection) -> None:
    """Editions and what changed between them; conditional fetches. Frozen: the v9 shapes.
    Existing topics and reports belong to no edition (NULL)."""
    for view in ("usage_by_topic", "usage_by_batch", "latest_reports", "report_sources",
                 "citation_quotes", "failures", "cost_by_batch"):
        con.execute(f"DROP VIEW IF EXISTS {view}")  # recreated after the last step
    con.execute("ALTER TABLE topics ADD COLUMN edition VARCHAR")
    con.execute("ALTER TABLE reports ADD COLUMN edition VARCHAR")
    con.execute("ALTER TABLE reports ADD COLUMN previous_report_id VARCHAR")
    con.execute("ALTER TABLE pages ADD COLUMN etag VARCHAR")
    con.execute("ALTER TABLE pages ADD COLUMN last_modified VARCHAR")
    con.execute("""
        CREATE TABLE changes (
            report_id VARCHAR, idx INTEGER, previous_report_id VARCHAR NOT NULL,
            kind VARCHAR NOT NULL, url VARCHAR, title VARCHAR, text VARCHAR, quote VARCHAR,
            before VARCHAR, PRIMARY KEY (report_id, idx))""")


def _add_call_memo(con: duckdb.DuckDBPyConnection) -> None:
    """The call memo; the ledger's 'served' outcome needs no column (the views, recreated after
    the last step, count it). Frozen: the v10 shape. Self-contained, so it can take another
    number if another version lands first."""
    con.execute("""
        CREATE TABLE call_memo (
            fingerprint VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, provider VARCHAR NOT NULL,
            model VARCHAR NOT NULL, role VARCHAR, answer JSON NOT NULL,
            created_at TIMESTAMPTZ NOT NULL)""")


def _count_fallbacks(con: duckdb.DuckDBPyConnection) -> None:
    """Fallbacks in the usage sums and their own view: views only, recreated after the last
    step. Frozen: no table changes."""


def _add_unanswered(con: duckdb.DuckDBPyConnection) -> None:
    """The parts a report leaves unanswered. Frozen: the v12 column; older reports say none
    (NULL), the gate did not exist when they were written."""
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                               "AND database_name = current_database()").fetchall():
        con.execute(f'DROP VIEW IF EXISTS "{view}"')  # recreated after the last step
    con.execute("ALTER TABLE reports ADD COLUMN unanswered VARCHAR[]")


# A v13 version's name, as core.store.source_versions.content_hash computes it.
_V13_HASH = "left(sha256(coalesce(text, '')), 16)"


def _version_sources(con: duckdb.DuckDBPyConnection) -> None:
    """Sources kept per (url, content hash), and what read or quoted them naming the version.
    Frozen: the v13 shapes. Each stored text becomes its page's one version; the topics that
    read it, the citations and the evidence quoting it point at that version."""
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                               "AND database_name = current_database()").fetchall():
        con.execute(f'DROP VIEW IF EXISTS "{view}"')  # recreated after the last step
    # DuckDB cannot change a primary key, so both tables are rebuilt and their rows copied.
    con.execute("CREATE TEMP TABLE sources_v12 AS SELECT * FROM sources")
    con.execute("DROP TABLE sources")
    con.execute("""
        CREATE TABLE sources (
            source_id VARCHAR, url VARCHAR NOT NULL, title VARCHAR, text VARCHAR,
            first_seen TIMESTAMPTZ NOT NULL, last_seen TIMESTAMPTZ NOT NULL,
            content_hash VARCHAR, PRIMARY KEY (source_id, content_hash))""")
    con.execute("INSERT INTO sources SELECT source_id, url, title, text, first_seen, last_seen, "
                f"{_V13_HASH} FROM sources_v12")
    con.execute("DROP TABLE sources_v12")
    con.execute("CREATE TEMP TABLE topic_sources_v12 AS SELECT * FROM topic_sources")
    con.execute("DROP TABLE topic_sources")
    con.execute("""
        CREATE TABLE topic_sources (
            topic_id VARCHAR, source_id VARCHAR, content_hash VARCHAR,
            PRIMARY KEY (topic_id, source_id, content_hash))""")
    # A row whose source was never stored has no version to name (save_result wrote both).
    con.execute("INSERT INTO topic_sources SELECT ts.topic_id, ts.source_id, s.content_hash "
                "FROM topic_sources_v12 ts JOIN sources s USING (source_id)")
    con.execute("DROP TABLE topic_sources_v12")
    con.execute("ALTER TABLE citations ADD COLUMN content_hash VARCHAR")
    _name_versions(con)


def _name_versions(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the v13 version columns of rows written before v13, where they are NULL: in a
    file after `_version_sources`, in a DuckLake after it gained the columns (LAKE_FILLS).
    Frozen. Before v13 a URL had one stored text, so each row names that one."""
    con.execute(f"UPDATE sources SET content_hash = {_V13_HASH} WHERE content_hash IS NULL")
    con.execute("UPDATE topic_sources SET content_hash = s.content_hash FROM sources s "
                "WHERE s.source_id = topic_sources.source_id "
                "AND topic_sources.content_hash IS NULL")
    con.execute("UPDATE citations SET content_hash = s.content_hash FROM sources s "
                "WHERE s.url = citations.url AND citations.content_hash IS NULL")
    versions = dict(con.execute("SELECT url, min(content_hash) FROM sources GROUP BY url")
                    .fetchall())
    stamped = []
    for topic_id, sub, claim, evidence in con.execute(
            "SELECT topic_id, subquestion_index, claim_index, evidence FROM findings "
            "WHERE evidence IS NOT NULL").fetchall():
        try:
            items = json.loads(evidence)
        except ValueError:
            continue
        if not isinstance(items, list):
            continue
        changed = False
        for item in items:
            if (isinstance(item, dict) and item.get("content_hash") is None
                    and item.get("url") in versions):
                item["content_hash"] = versions[item["url"]]
                changed = True
        if changed:
            stamped.append([topic_id, sub, claim, json.dumps(items)])
    if stamped:
        con.execute("CREATE TEMP TABLE evidence_v13 (topic_id VARCHAR, subquestion_index "
                    "INTEGER, claim_index INTEGER, evidence VARCHAR)")
        con.executemany("INSERT INTO evidence_v13 VALUES (?, ?, ?, ?)", stamped)
        con.execute("UPDATE findings SET evidence = e.evidence::JSON FROM evidence_v13 e "
                    "WHERE findings.topic_id = e.topic_id "
                    "AND findings.subquestion_index = e.subquestion_index "
                    "AND findings.claim_index = e.claim_index")
        con.execute("DROP TABLE evidence_v13")


# MIGRATIONS[n] takes a file from version n to n + 1.
MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6, 6: _v6_to_v7,
    7: _v7_to_v8, 8: _v8_to_v9, 9: _add_call_memo, 10: _count_fallbacks, 11: _add_unanswered,
    12: _version_sources}
# LAKE_FILLS[n]: what a DuckLake of version n or older runs once it has gained the columns of
# version n + 1 (core.store.lake_schema adds columns; data it cannot derive is filled here).
LAKE_FILLS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {12: _name_versions}


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
