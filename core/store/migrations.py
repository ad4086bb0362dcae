"""The frozen steps that bring an older store file to the next schema version, one per version.

A step is frozen once released: it spells out the shape of its own version rather than reusing
the current schema (core.store.schema `_TABLES`), so a later change to the current schema
cannot change what an old step does. Views are not a step's business: each step may drop them,
and `schema.ensure_schema` recreates the current views after the last step. A DuckLake gains
new tables and columns from the current schema instead (core.store.lake_schema); what those
columns must hold for older rows is a step of `LAKE_FILLS`.

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
     read; `report_editions` is ordered by the edition's name (schema.edition_order) and gains
     `predecessor_report_id` and `stale`, which `report_changes` shows too
  14 a store that explains itself: `COMMENT ON` every table, view and column
     (core.store.comments); the usage ledger `llm_calls` becomes `ledger` with a `kind` (llm,
     search, served, fallback), and `llm_calls` is a view of its kind 'llm'; `reports` gains
     its evidence strength: `parts_unanswered`, `quotes`, `pages`, `sections`,
     `sections_without_evidence`, `thin_evidence` (older reports: counted from their citations
     and header; their sections NULL); `usage_by_topic` and `usage_by_batch` list every topic
     and batch, 0 spent offline, with the work counted (`subquestions`, `sources_read`,
     `claims`, `quotes`); `latest_reports` gains `thin_evidence`
"""

from __future__ import annotations

import json
from collections.abc import Callable

import duckdb


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


# What a v14 row of the ledger is (core.store.ledger.kind_of, frozen as SQL).
_V14_KIND = ("CASE WHEN outcome = 'served' THEN 'served' WHEN outcome = 'fallback' THEN 'fallback' "
             "WHEN role = 'search' THEN 'search' ELSE 'llm' END")
_V14_CALL_COLUMNS = ("call_id, run_id, batch_id, topic_id, subquestion_index, role, provider, "
                     "model, outcome, input_tokens, cached_input_tokens, output_tokens, "
                     "reasoning_tokens, tokens_estimated, latency_ms, cost_usd, error, created_at")
# The line a report's header has when its evidence is thin, in the four languages v14 writes
# (core.reports.report's heading "evidence"); report text is escaped, so only the header has it.
_V14_THIN = ("**Evidence:**", "**证据:**", "**根拠:**", "**근거:**")


def _ledger_and_evidence(con: duckdb.DuckDBPyConnection) -> None:
    """The ledger named for what it holds, and a report's evidence strength in columns.
    Frozen: the v14 shapes. `llm_calls` becomes `ledger` with a kind (llm, search, served,
    fallback), and a view of that name shows its kind 'llm'; reports gain parts_unanswered,
    quotes, pages, sections, sections_without_evidence and thin_evidence."""
    for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                               "AND database_name = current_database()").fetchall():
        con.execute(f'DROP VIEW IF EXISTS "{view}"')  # recreated after the last step
    for column, type_ in (("parts_unanswered", "INTEGER"), ("quotes", "INTEGER"),
                          ("pages", "INTEGER"), ("sections", "INTEGER"),
                          ("sections_without_evidence", "INTEGER"),
                          ("thin_evidence", "BOOLEAN")):
        con.execute(f"ALTER TABLE reports ADD COLUMN {column} {type_}")
    con.execute("""
        CREATE TABLE ledger (
            call_id VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
            batch_id VARCHAR NOT NULL, topic_id VARCHAR, subquestion_index INTEGER,
            role VARCHAR NOT NULL, provider VARCHAR NOT NULL, model VARCHAR NOT NULL,
            outcome VARCHAR NOT NULL, input_tokens BIGINT, cached_input_tokens BIGINT,
            output_tokens BIGINT, reasoning_tokens BIGINT, tokens_estimated BOOLEAN NOT NULL,
            latency_ms DOUBLE NOT NULL, cost_usd DOUBLE, error VARCHAR,
            created_at TIMESTAMPTZ NOT NULL)""")
    _fill_v14(con)


def _fill_v14(con: duckdb.DuckDBPyConnection) -> None:
    """Move the rows of a table `llm_calls` into `ledger` with their kind, and fill the v14
    report columns of rows written before v14, where they are NULL: in a file after
    `_ledger_and_evidence`, in a DuckLake after it gained the table and columns (LAKE_FILLS).
    Frozen. What an older report does not record (its sections, those without evidence) stays
    NULL; what its citations and header say is counted."""
    table = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'llm_calls' "
                        "AND database_name = current_database()").fetchone()[0]
    if table:
        con.execute(f"INSERT INTO ledger (kind, {_V14_CALL_COLUMNS}) SELECT {_V14_KIND}, "
                    f"{_V14_CALL_COLUMNS} FROM llm_calls")
        con.execute("DROP TABLE llm_calls")
    con.execute("UPDATE reports SET parts_unanswered = len(coalesce(unanswered, []::VARCHAR[])) "
                "WHERE parts_unanswered IS NULL")
    con.execute("UPDATE reports SET quotes = c.quotes, pages = c.pages FROM ("
                "SELECT report_id, count(*) AS quotes, "
                "count(DISTINCT split_part(url, '#', 1)) AS pages FROM citations "
                "GROUP BY report_id) c WHERE c.report_id = reports.report_id "
                "AND reports.quotes IS NULL")
    con.execute("UPDATE reports SET quotes = 0, pages = 0 WHERE quotes IS NULL")
    thin = " OR ".join(f"contains(markdown, '{marker}')" for marker in _V14_THIN)
    con.execute(f"UPDATE reports SET thin_evidence = ({thin}) WHERE thin_evidence IS NULL")


# MIGRATIONS[n] takes a file from version n to n + 1.
MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _v5_to_v6, 6: _v6_to_v7,
    7: _v7_to_v8, 8: _v8_to_v9, 9: _add_call_memo, 10: _count_fallbacks, 11: _add_unanswered,
    12: _version_sources, 13: _ledger_and_evidence}
# LAKE_FILLS[n]: what a DuckLake of version n or older runs once it has gained the columns of
# version n + 1 (core.store.lake_schema adds columns; data it cannot derive is filled here).
LAKE_FILLS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {12: _name_versions,
                                                                      13: _fill_v14}
