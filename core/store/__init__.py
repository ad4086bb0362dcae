"""The DuckDB store: research results, the usage ledger, and read-only queries over them, in one
DuckDB file (one writing process) or in a DuckLake (many writers, several machines).

A map of the package (imports run top to bottom; nothing here imports prefect):

    connection  open the live file (held while working), publish the analysts' read copy,
                in-process locks, the store's exceptions
    migrations  the frozen steps from each older schema version to the next
    comments    what every table, view and column holds, written into the store (COMMENT ON)
    schema      tables, views, SCHEMA_VERSION, edition order; brings a file up to date
    redaction   public_settings: what a run's settings snapshot may contain
    backend     where a store lives: a file, or a `ducklake:` target; read, write(body)
    dialect     the store's SQL that DuckLake lacks (ON CONFLICT, RETURNING), rewritten
    lake_schema the file schema without constraints, and additive lake migrations
    lake        a DuckLake: offline extensions, one instance per process, the key guard and
                the retry of conflicting commits
    ledger      the usage ledger: CallRecord rows in (with their kind), UsageTotals out
    source_versions  a page's text per (url, content hash): the version a quote came from
    results     ResultStore: runs, topics, results, the ledger's methods, readers
    pages       PageStore: the web cache (fetched pages, search results); never fails a fetch
    query       query_readonly: a user's SQL on a read-only connection

Exceptions: `StoreError` > `StoreLockedError` (another process holds the file),
`StoreConflictError` (a DuckLake commit kept conflicting after every retry) and
`ReadOnlyQueryError` (a write attempted through `query_readonly`).

Import from here; the modules are the implementation.
"""

from core.store.connection import ReadOnlyQueryError, StoreError, StoreLockedError
from core.store.lake import StoreConflictError
from core.store.pages import PageRecord, PageStore
from core.store.query import query_readonly
from core.store.redaction import public_settings
from core.store.results import ResultStore
from core.store.schema import SCHEMA_VERSION, TABLES

__all__ = ["SCHEMA_VERSION", "TABLES", "PageRecord", "PageStore", "ReadOnlyQueryError",
           "ResultStore", "StoreConflictError", "StoreError", "StoreLockedError",
           "public_settings", "query_readonly"]
