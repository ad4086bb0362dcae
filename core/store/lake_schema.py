"""What a DuckLake store's tables are: the file schema without the constraints DuckLake lacks.

`lake_schema()` builds the current file schema (core.store.schema) in an in-memory DuckDB and
reads it back: each table's columns with their types, NOT NULL and defaults, the primary keys
(which the store's writes keep, since the lake cannot), and the views in creation order. So a
new table, column or view in schema.py reaches lakes with no lake-specific change. `GUARD` is
the one-row table whose update makes keyed writes conflict (core.store.lake).

`ensure` brings a lake to the current version: everything in an empty lake; in an older one
the missing tables and columns, what those columns hold for older rows (`migrations.LAKE_FILLS`),
the views again, and the version. A migration that changes a column's type or drops something
is refused: it needs a hand on the lake. A changed primary key needs nothing: the lake keeps
keys through the store's writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from core.store import comments, dialect, migrations, schema
from core.store.connection import StoreError

GUARD = "lake_guard"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool
    default: str | None

    def ddl(self) -> str:
        return (f"{self.name} {self.type}" + (" NOT NULL" if self.not_null else "")
                + (f" DEFAULT {self.default}" if self.default is not None else ""))


@dataclass(frozen=True)
class LakeSchema:
    """The store's schema as a lake holds it: tables in creation order, their primary keys
    (kept by the store's writes, not by DuckLake), and the views."""

    tables: dict[str, tuple[Column, ...]]
    keys: dict[str, tuple[str, ...]]
    views: tuple[tuple[str, str], ...]

    def columns_of(self, table: str) -> list[str]:
        if table not in self.tables:
            raise dialect.DialectError(f"no table {table!r} in the store's schema")
        return [c.name for c in self.tables[table]]


@cache
def lake_schema() -> LakeSchema:
    """The current file schema (core.store.schema), read back from an in-memory DuckDB."""
    con = duckdb.connect()
    try:
        schema.ensure_schema(con, Path(":memory:"))
        tables: dict[str, list[Column]] = {}
        for table, name, type_, nullable, default in con.execute(
                "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable, "
                "c.column_default FROM duckdb_columns() c JOIN duckdb_tables() t "
                "ON t.table_oid = c.table_oid WHERE NOT c.internal AND NOT t.temporary "
                "ORDER BY t.table_oid, c.column_index").fetchall():
            tables.setdefault(table, []).append(Column(name, type_, not nullable, default))
        keys = {t: tuple(cols) for t, cols in con.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY'").fetchall()}
        views = tuple((name, re.sub(r"^\s*CREATE\s+VIEW", "CREATE OR REPLACE VIEW", sql, 1,
                                    re.I))
                      for name, sql in con.execute(
                          "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal "
                          "AND NOT temporary ORDER BY view_oid").fetchall())
    finally:
        con.close()
    tables[GUARD] = [Column("id", "INTEGER", True, None), Column("commits", "BIGINT", True, None)]
    return LakeSchema({t: tuple(cols) for t, cols in tables.items()}, keys, views)


def ensure(cursor: duckdb.DuckDBPyConnection, *, database: str, name: str) -> None:
    """Inside the caller's transaction: create the schema in an empty lake, or add what an
    older one lacks (tables, columns, views) and record the version; refuse anything else."""
    target = lake_schema()
    have: dict[str, dict[str, str]] = {}
    for table, column, type_ in cursor.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = ? ORDER BY column_index", [database]).fetchall():
        have.setdefault(table, {})[column] = type_
    version = None
    if "meta" in have:
        row = cursor.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = None if row is None else int(row[0])
    if version == schema.SCHEMA_VERSION:
        return
    if version is not None and version > schema.SCHEMA_VERSION:
        raise StoreError(f"the DuckLake {name} has schema version {version}, newer than this "
                         f"researchflow understands ({schema.SCHEMA_VERSION}); upgrade it")
    for table, columns in target.tables.items():
        if table not in have:
            cursor.execute(f"CREATE TABLE {table} ({', '.join(c.ddl() for c in columns)})")
            continue
        for column in columns:
            found = have[table].get(column.name)
            if found is None:
                cursor.execute(f"ALTER TABLE {table} ADD COLUMN {column.name} {column.type}"
                               + (f" DEFAULT {column.default}" if column.default is not None else ""))
            elif found != column.type:
                raise StoreError(f"the DuckLake {name} has {table}.{column.name} as {found}, "
                                 f"not {column.type}; it needs a migration by hand")
    for step in range(version if version is not None else schema.SCHEMA_VERSION,
                      schema.SCHEMA_VERSION):
        if step in migrations.LAKE_FILLS:  # what the columns just added hold for older rows
            migrations.LAKE_FILLS[step](cursor)
    if cursor.execute(f"SELECT count(*) FROM {GUARD}").fetchone()[0] == 0:
        cursor.execute(f"INSERT INTO {GUARD} VALUES (1, 0)")
    for _, sql in target.views:
        cursor.execute(sql)
    comments.comment(cursor, view_columns=False)
    cursor.execute("DELETE FROM meta WHERE key = 'schema_version'")
    cursor.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(schema.SCHEMA_VERSION)])
