"""What every table, view and column of a store holds, said in the store itself (`COMMENT ON`).

An analyst who opens the store in the DuckDB CLI or a notebook reads these with
`SELECT table_name, comment FROM duckdb_tables()`, `duckdb_views()` and `duckdb_columns()`
(or `.schema`/`DESCRIBE` in clients that show comments). `comment(con)` writes them after the
schema is created or migrated (core.store.schema): views are recreated by every migration,
which drops their comments, so they are written again each time.

A column's text is `COLUMNS[(table, column)]`, else `SHARED[column]` (a name that means the same
in every table and view). A test checks that every table, view and column has one.

A DuckLake keeps the comments of its tables, their columns and its views, not of a view's
columns, which DuckLake refuses.

What it does not do: document the schema's history (core.store.migrations does).
"""

from __future__ import annotations

import duckdb

TABLES: dict[str, str] = {
    "meta": "Bookkeeping: the store's schema version (key 'schema_version').",
    "runs": "One row per run: a batch of a CSV or a lone topic, with its process, settings "
            "and outcome.",
    "topics": "One row per topic of a batch and edition: its latest attempt's outcome; a "
              "failure never removes an earlier success's report_id.",
    "subquestions": "The sub-questions a topic researched: wave 1 the plan's, later waves the "
                    "supervisor's follow-ups.",
    "sources": "Every page a topic read, one row per version of its text (url, content_hash); "
               "a version is never overwritten.",
    "topic_sources": "Which version of which page each topic read.",
    "findings": "What each sub-question found: one row per claim with its quoted evidence "
                "(claim_index -1: raw notes without claims).",
    "citations": "A report's numbered references: each url with its verbatim quote and the "
                 "version of the page quoted.",
    "reports": "One report per topic and edition: markdown, language, and how strong its "
               "evidence is (thin_evidence, parts_unanswered and the counts behind them).",
    "changes": "What changed in a report since the topic's previous edition, one row per item.",
    "ledger": "The usage ledger: one row per billed call or event (kind llm, search, served, "
              "fallback), never deleted; what each cost.",
    "model_limits": "Context windows and output caps that provider errors taught, per model.",
    "pages": "The web cache: one fetch per normalised URL, its text or why it was refused or "
             "unavailable.",
    "searches": "The search cache: one result list per engine, locale, normalised query and k.",
    "call_memo": "The call memo: the answer of each successful billed call by a hash of its "
                 "request, served to a repeat at $0; never the request or a key.",
    "llm_calls": "The ledger's LLM calls (kind 'llm'): the table of this name before schema "
                 "14, kept as a view. Searches, served repeats and fallbacks are in ledger.",
    "usage_by_topic": "Per topic: what it spent (0 for the offline engine or served runs) and "
                      "the work it did (sub-questions, sources read, claims, quotes).",
    "usage_by_batch": "Per batch: what it spent (0 offline) and the work its topics did.",
    "fallbacks": "Roles the extractive engine answered because a model's answers stayed "
                 "invalid, per topic and role.",
    "latest_reports": "The newest report per topic text, whatever batch or edition wrote it.",
    "report_editions": "Every edition of every topic in edition order, with the predecessor "
                       "each compares with.",
    "report_changes": "Per report of a second or later edition: what changed since the "
                      "previous one, counted by kind.",
    "report_sources": "Every source a report's topic read, in the version read, with its first "
                      "reference number (NULL: not cited).",
    "citation_quotes": "Every quote of every report checked against the version of the page it "
                       "cites.",
    "source_versions": "Every version of every page, with the reports citing it.",
    "failures": "Topics whose latest attempt did not succeed (failed, skipped, invalid CSV "
                "rows), with why.",
    "cost_by_batch": "Per batch: outcomes (topics, reports, failed, skipped, invalid) next to "
                     "what it spent.",
}

SHARED: dict[str, str] = {
    "run_id": "The run (runs.run_id; a Prefect flow run id).",
    "batch_id": "The batch name: --batch-name, by default the CSV file's stem; a lone topic's "
                "own name. Edition history is kept per batch name and topic.",
    "topic_id": "The topic of a batch and edition (topics.topic_id).",
    "topic": "The topic's text as the CSV row or command gave it.",
    "report_id": "The report (reports.report_id).",
    "previous_report_id": "The report of the topic's previous edition that this one was "
                          "compared with (NULL: the first edition).",
    "edition": "The edition (a scheduled batch's run, its date by default); NULL: none.",
    "status": "The outcome: succeeded, failed, skipped or invalid.",
    "error": "Why it failed, in one line (keys masked).",
    "engine": "The research engine that wrote it: model-driven or offline (extractive).",
    "updated_at": "When this row was last written.",
    "created_at": "When it was written.",
    "url": "The page's URL.",
    "title": "The page's or report's title.",
    "text": "The text.",
    "source_id": "The page's id: a hash of its normalised URL.",
    "content_hash": "The version of the page's text: the first 16 hex digits of its SHA-256.",
    "first_seen": "When this version was first read.",
    "last_seen": "When this version was last read.",
    "number": "The reference number in the report, from 1.",
    "quote": "The quote, verbatim from the page.",
    "subquestion_index": "The sub-question (subquestions.idx) within its topic.",
    "language": "The report's language (en, zh, ja, ko...).",
    "unanswered": "The parts of the topic no evidence answered, as the report's header names "
                  "them.",
    "quotes": "Quotes the report cites (its references).",
    "thin_evidence": "Whether the report says its evidence is thin: under three quotes, one "
                     "page, or more than one section (and a third of them) without evidence.",
    "call_id": "The call's id, unique in the ledger.",
    "kind": "What the row is.",
    "role": "The step that made the call (plan, choose, condense, queries, compress, review, "
            "report, search...).",
    "provider": "The provider (openai, anthropic, serpapi, searxng, corpus...).",
    "model": "The model, or the search engine.",
    "outcome": "ok; served (the call memo answered, $0); fallback (the extractive engine "
               "answered, not a call); else the signal's name (RateLimited...).",
    "input_tokens": "Input tokens, as the provider counted them (or estimated).",
    "cached_input_tokens": "Input tokens the provider served from its prompt cache.",
    "output_tokens": "Output tokens.",
    "reasoning_tokens": "Reasoning tokens inside the output tokens.",
    "tokens_estimated": "Whether the tokens were estimated (the provider reported none).",
    "latency_ms": "How long the call took, in milliseconds.",
    "cost_usd": "What it cost in US dollars (NULL: no known price).",
    "reason": "Why: for a page, why it was refused or unavailable; for a quote, why it is not "
              "verified.",
    "fetched_at": "When it was fetched.",
    "calls": "Calls made or served (fallbacks are not calls).",
    "failed_calls": "Calls that failed (not ok, served or fallback).",
    "searches": "Searches made or served.",
    "unpriced_calls": "Successful calls with no known price (their cost counts as 0).",
    "served_calls": "Repeats the call memo served at $0.",
    "fallbacks": "Roles the extractive engine answered for a model.",
    "fallback_roles": "Those roles, comma-separated.",
    "subquestions": "Sub-questions researched (every wave).",
    "sources_read": "Versions of pages read.",
    "claims": "Claims found (rows of findings with a claim).",
    "first_call_at": "The first ledger row's time (NULL: no row, e.g. offline).",
    "last_call_at": "The last ledger row's time (NULL: no row).",
    "topics": "Topics.",
    "reports": "Reports.",
    "stale": "Whether its comparison was not made against the predecessor as stored now "
             "(another edition came between, or it was written again): researchflow diff "
             "compares again.",
    "idx": "The position, from 0.",
    "n": "Counts from 1 in order.",
}

COLUMNS: dict[tuple[str, str], str] = {
    ("meta", "key"): "The setting's name.",
    ("meta", "value"): "Its value.",
    ("runs", "run_id"): "The run's id (a Prefect flow run id).",
    ("runs", "started_at"): "When the run started.",
    ("runs", "finished_at"): "When it finished (NULL: running, or its process was killed).",
    ("runs", "status"): "running, succeeded, failed, or crashed (its process was killed).",
    ("runs", "engine"): "The research engine the run used.",
    ("runs", "search_backend"): "Where it searched: corpus, serpapi or searxng.",
    ("runs", "settings_json"): "The run's settings, keys shown only as set or unset.",
    ("runs", "host"): "The machine running it.",
    ("runs", "pid"): "Its process id on that host.",
    ("topics", "status"): "succeeded, failed, skipped (over budget, or stored already) or "
                          "invalid (a CSV row that could not become a topic).",
    ("topics", "report_id"): "The report of the latest success (kept when a later attempt "
                             "fails).",
    ("subquestions", "idx"): "The sub-question's number within its topic, from 0.",
    ("subquestions", "question"): "The sub-question.",
    ("subquestions", "queries"): "The searches planned for it.",
    ("subquestions", "wave"): "1: the plan's; 2 and up: a follow-up after reviewing the wave "
                              "before.",
    ("subquestions", "why"): "For a follow-up: the gap it fills.",
    ("subquestions", "parent"): "For a follow-up: the idx of the section it completes (NULL: a "
                                "new section).",
    ("sources", "text"): "The page's full extracted text in this version.",
    ("sources", "title"): "The page's title, as last read.",
    ("findings", "subquestion"): "The sub-question's text.",
    ("findings", "claim_index"): "The claim's position in the finding, from 0; -1: no claims, "
                                 "raw notes only.",
    ("findings", "claim"): "The claim (NULL for raw notes).",
    ("findings", "confidence"): "high, medium, low, or conflict (sources disagree).",
    ("findings", "evidence"): "JSON list of {url, title, quote, section, content_hash}: the "
                              "quotes behind the claim and the version each came from.",
    ("findings", "raw_notes"): "The researcher's notes for the sub-question.",
    ("citations", "content_hash"): "The version of the page the quote was taken from (NULL: "
                                   "the page was never stored).",
    ("reports", "title"): "The report's title.",
    ("reports", "markdown"): "The whole report in markdown, references included.",
    ("reports", "flags"): "What the writer's checks found (a number in prose not in its "
                          "quote...).",
    ("reports", "parts_unanswered"): "How many parts of the topic no evidence answered (the "
                                     "length of unanswered).",
    ("reports", "pages"): "Distinct pages the report cites.",
    ("reports", "sections"): "Sections the plan asked for (NULL: written before schema 14).",
    ("reports", "sections_without_evidence"): "Sections left without a cited quote, marked "
                                              "[insufficient evidence] (NULL: before schema 14).",
    ("changes", "idx"): "The item's position in the comparison, from 0.",
    ("changes", "kind"): "source_added, source_gone, claim_added, claim_dropped, "
                         "claim_changed or number_changed.",
    ("changes", "title"): "The page's title.",
    ("changes", "text"): "The claim or number as it is now.",
    ("changes", "quote"): "The quote behind it.",
    ("changes", "before"): "What it was in the previous edition.",
    ("ledger", "kind"): "llm (an LLM call), search (a search), served (a repeat the call memo "
                        "answered at $0), fallback (the extractive engine answered a role for "
                        "a model: not a call).",
    ("ledger", "error"): "Why the call failed, in one line (keys masked).",
    ("llm_calls", "error"): "Why the call failed, in one line (keys masked).",
    ("model_limits", "model"): "The model, normalised.",
    ("model_limits", "context_window"): "Its context window in tokens, as an error said.",
    ("model_limits", "max_output"): "Its output cap in tokens.",
    ("model_limits", "request_budget"): "The most tokens one request may carry.",
    ("model_limits", "updated_at"): "When an error last taught it.",
    ("pages", "url"): "The normalised URL.",
    ("pages", "final_url"): "Where redirects led.",
    ("pages", "status"): "ok, refused (never fetched again: not a page, or not allowed) or "
                         "unavailable (tried again later).",
    ("pages", "text"): "The extracted text.",
    ("pages", "bytes"): "What the fetch downloaded.",
    ("pages", "etag"): "The server's ETag, for a conditional fetch.",
    ("pages", "last_modified"): "The server's Last-Modified, for a conditional fetch.",
    ("searches", "key"): "A hash of engine, locale, normalised query and k.",
    ("searches", "engine"): "The search engine.",
    ("searches", "query"): "The normalised query.",
    ("searches", "results"): "JSON list of the results (url, title, snippet).",
    ("call_memo", "fingerprint"): "sha256 of the request (provider, model, messages, options; "
                                  "for a search its edition), never the request itself.",
    ("call_memo", "kind"): "llm or search.",
    ("call_memo", "answer"): "The answer, as JSON.",
    ("usage_by_topic", "status"): "The topic's latest outcome (NULL: a ledger topic with no "
                                  "row in topics).",
    ("usage_by_topic", "engine"): "The engine that wrote its report (NULL: no report).",
    ("usage_by_topic", "quotes"): "Quotes its report cites.",
    ("usage_by_batch", "topics"): "Topics of the batch (every topic, with or without calls).",
    ("usage_by_batch", "quotes"): "Quotes its reports cite.",
    ("fallbacks", "times"): "How many times.",
    ("fallbacks", "last_reason"): "The latest reason the model's answer was refused.",
    ("fallbacks", "last_at"): "When it last happened.",
    ("report_editions", "n"): "The edition's place among the topic's editions, from 1.",
    ("report_editions", "predecessor_report_id"): "The edition before it as the store holds "
                                                  "it now.",
    ("report_changes", "previous_edition"): "The previous report's edition.",
    ("report_changes", "changes"): "Items changed.",
    ("report_changes", "sources_added"): "Pages cited now and not before.",
    ("report_changes", "sources_gone"): "Pages cited before and not now.",
    ("report_changes", "claims_added"): "Claims new in this edition.",
    ("report_changes", "claims_dropped"): "Claims no longer made.",
    ("report_changes", "claims_changed"): "Claims that changed.",
    ("report_changes", "numbers_changed"): "Numbers that changed.",
    ("report_sources", "number"): "The first reference number citing it (NULL: read, not "
                                  "cited).",
    ("citation_quotes", "report_title"): "The report's title.",
    ("citation_quotes", "title"): "The page's title.",
    ("citation_quotes", "verified"): "Whether the quote is in that version of the page "
                                     "verbatim (whitespace collapsed).",
    ("source_versions", "n"): "The version's number for its URL, from 1, in the order first "
                              "seen.",
    ("source_versions", "chars"): "Length of the text in characters.",
    ("source_versions", "reports"): "The reports citing this version.",
    ("failures", "report_id"): "An earlier success's report, which a failure never deletes.",
    ("cost_by_batch", "failed"): "Topics that failed.",
    ("cost_by_batch", "skipped"): "Topics skipped.",
    ("cost_by_batch", "invalid"): "CSV rows that could not become topics.",
    ("cost_by_batch", "cost_per_report"): "cost_usd divided by reports (NULL: no report).",
}


def text_for(table: str, column: str) -> str | None:
    """The comment of one column, or None when none is written."""
    return COLUMNS.get((table, column)) or SHARED.get(column)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def comment(con: duckdb.DuckDBPyConnection, *, view_columns: bool = True) -> None:
    """COMMENT ON every table, view and column of the current database that has a text here.
    A DuckLake refuses comments on a view's columns ("it is not a table"): view_columns=False
    leaves those out."""
    relations = con.execute(
        "SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE database_name = "
        "current_database() AND NOT temporary UNION ALL SELECT view_name, 'VIEW' FROM "
        "duckdb_views() WHERE database_name = current_database() AND NOT internal "
        "AND NOT temporary").fetchall()
    for name, what in relations:
        if name in TABLES:
            con.execute(f'COMMENT ON {what} "{name}" IS {_quoted(TABLES[name])}')
    views = {name for name, what in relations if what == "VIEW"}
    for table, column in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = "
            "current_database() AND NOT internal").fetchall():
        text = text_for(table, column)
        if text is not None and table in TABLES and (view_columns or table not in views):
            con.execute(f'COMMENT ON COLUMN "{table}"."{column}" IS {_quoted(text)}')
