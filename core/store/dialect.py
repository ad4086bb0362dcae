"""The store's SQL that DuckLake does not take, rewritten into SQL it does (for core.store.lake).

DuckLake tables have no PRIMARY KEY, UNIQUE or CHECK constraint, and an UPDATE there cannot
return rows. The store's statements are written once, for DuckDB files; on a lake:

    INSERT INTO t [(cols)] VALUES (...)        MERGE INTO t USING (VALUES (...)) AS excluded(cols)
      ON CONFLICT (key) DO UPDATE SET ...  ->    ON t.key = excluded.key
                                                 WHEN MATCHED THEN UPDATE SET ...   (verbatim)
                                                 WHEN NOT MATCHED THEN INSERT ...
    ... ON CONFLICT (key) DO NOTHING       ->  the same MERGE without its WHEN MATCHED branch
    UPDATE t SET ... WHERE p RETURNING c   ->  SELECT c FROM t WHERE p, then the UPDATE

The incoming row keeps the name `excluded`, so a SET clause written for ON CONFLICT (which may
also name the stored row as `t.col`) means the same in the MERGE. A RETURNING list may only name
columns the UPDATE leaves alone (the rows are read before it runs).

What it does not do: decide uniqueness under concurrency. A MERGE of a key that two transactions
both find missing inserts it twice; core.store.lake makes such transactions conflict (`keyed`
says which statements need that). A statement that mentions ON CONFLICT, OR REPLACE or RETURNING
in any other shape raises `DialectError` rather than run with a different meaning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_UPSERT = re.compile(
    r"^\s*INSERT\s+INTO\s+(?P<table>\w+)\s*(?:\((?P<cols>[^)]*)\))?\s*VALUES\s*\((?P<vals>.*)\)"
    r"\s*ON\s+CONFLICT\s*\((?P<keys>[^)]*)\)\s*DO\s+(?:(?P<nothing>NOTHING)|UPDATE\s+SET\s+"
    r"(?P<set>.*?))\s*;?\s*$", re.I | re.S)
_UPDATE_RETURNING = re.compile(
    r"^\s*UPDATE\s+(?P<table>\w+)\s+SET\s+(?P<set>.*?)\s+WHERE\s+(?P<where>.*?)\s+RETURNING\s+"
    r"(?P<ret>.*?)\s*;?\s*$", re.I | re.S)
_INSERT_VALUES = re.compile(
    r"^\s*INSERT\s+INTO\s+\w+\s*(?:\([^)]*\))?\s*VALUES\s*(?P<row>\((?P<vals>.*)\))\s*;?\s*$",
    re.I | re.S)
_UNSUPPORTED = re.compile(r"\bON\s+CONFLICT\b|\bOR\s+REPLACE\s+INTO\b|\bRETURNING\b", re.I)
_KEYED = re.compile(r"^\s*(MERGE|UPDATE|DELETE)\b", re.I)
_ASSIGNED = re.compile(r"(?:^|,)\s*(\w+)\s*=")


class DialectError(ValueError):
    """A statement DuckLake cannot run and this module cannot rewrite."""


@dataclass(frozen=True)
class Statement:
    """What to run on the lake for one statement of the store.

    `select` (with the first `select_params_from` parameters dropped) runs before `sql` when
    the original returned rows; `keyed`: it may change or remove a row found by its key;
    `row`: the one VALUES tuple of an insert, which `for_rows` repeats to write many rows in
    one statement (a lake statement costs catalog round trips, a row almost nothing).
    """

    sql: str
    keyed: bool
    select: str | None = None
    select_params_from: int = 0
    row: str | None = None
    table: str | None = None

    def select_params(self, params: Sequence[object] | None) -> list[object]:
        return list(params or [])[self.select_params_from:]

    def for_rows(self, count: int) -> str:
        """The statement with its VALUES tuple repeated `count` times (rows must not share a
        key: like ON CONFLICT, a MERGE takes one row per key)."""
        if self.row is None:
            raise DialectError("only an INSERT ... VALUES (...) writes many rows at once")
        return self.sql.replace(f"VALUES {self.row}", "VALUES " + ", ".join([self.row] * count),
                                1)


ColumnsOf = Callable[[str], Sequence[str]]


def translate(sql: str, columns_of: ColumnsOf) -> Statement:
    """The lake's form of `sql`; `columns_of(table)` names a table's columns in order."""
    if (m := _UPSERT.match(sql)) is not None:
        return Statement(_merge(m, columns_of), keyed=True, row=f"({m['vals']})",
                         table=m["table"])
    if (m := _UPDATE_RETURNING.match(sql)) is not None:
        return _update_returning(m)
    if _UNSUPPORTED.search(sql):
        raise DialectError(f"a DuckLake store cannot run this statement: {_short(sql)}")
    if (m := _INSERT_VALUES.match(sql)) is not None:
        return Statement(sql, keyed=False, row=m["row"])
    return Statement(sql, keyed=_KEYED.match(sql) is not None)


def _merge(m: re.Match[str], columns_of: ColumnsOf) -> str:
    table = m["table"]
    cols = _names(m["cols"]) if m["cols"] else list(columns_of(table))
    keys = _names(m["keys"])
    if not keys or not set(keys) <= set(cols):
        raise DialectError(f"ON CONFLICT ({m['keys']}) names columns the INSERT does not set")
    on = " AND ".join(f"{table}.{k} = excluded.{k}" for k in keys)
    matched = "" if m["nothing"] else f" WHEN MATCHED THEN UPDATE SET {m['set']}"
    return (f"MERGE INTO {table} USING (VALUES ({m['vals']})) AS excluded({', '.join(cols)}) "
            f"ON {on}{matched} WHEN NOT MATCHED THEN INSERT ({', '.join(cols)}) "
            f"VALUES ({', '.join('excluded.' + c for c in cols)})")


def _update_returning(m: re.Match[str]) -> Statement:
    returned = _names(m["ret"])
    assigned = {name.lower() for name in _ASSIGNED.findall(m["set"])}
    if any(not re.fullmatch(r"\w+", name) or name.lower() in assigned for name in returned):
        raise DialectError("UPDATE ... RETURNING on a DuckLake store may only return plain "
                           f"columns the update leaves alone: {_short(m.string)}")
    update = f"UPDATE {m['table']} SET {m['set']} WHERE {m['where']}"
    return Statement(update, keyed=True,
                     select=f"SELECT {m['ret']} FROM {m['table']} WHERE {m['where']}",
                     select_params_from=m["set"].count("?"), table=m["table"])


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _short(sql: str) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= 160 else flat[:157] + "..."
