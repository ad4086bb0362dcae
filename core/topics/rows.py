"""Read a CSV of topics: every good row becomes a Topic, every bad row a RowError.

One bad row never sinks the batch: it is reported with its row number and what to fix, and the
other rows still run. A row is bad on its own for bytes that are not UTF-8, a cell too large,
an option out of range, an empty or duplicate topic. Only a file that cannot be a topic list at
all (missing, unreadable, no `topic` column) raises `BatchFileError`. Columns the batch does
not read are reported through `warn`.
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from core.models import TOPIC_OPTIONS, Topic, TopicOptions, stable_id

# Per-row columns a CSV may carry (the fields of TopicOptions); a row's value wins over the
# batch's default.
OVERRIDES = TOPIC_OPTIONS


class BatchFileError(ValueError):
    """The CSV as a whole is unusable; the message says what to do."""


MAX_CELL = 131_072  # characters in one cell (the csv module's own default limit)
_FIELD_LIMIT = threading.Lock()  # csv.field_size_limit is process-wide


@dataclass(frozen=True)
class RowError:
    row: int  # 1-based line number in the file, header = 1
    message: str
    topic: str = field(default="", compare=False)  # the row's topic cell, as far as readable
    key: str = field(default="", compare=False)  # its topic_id when recorded as invalid

    def topic_id(self, batch_id: str) -> str:
        """The id under which the store records this row as invalid: the topic's own when
        the row names one (a fixed row replaces the record), else one of the row."""
        return self.key or stable_id(batch_id, "invalid row", str(self.row))


@dataclass(frozen=True)
class TopicRow:
    row: int
    topic: Topic


def read_topics_csv(path: Path, *, batch_id: str, defaults: TopicOptions | None = None,
                    warn: Callable[[str], None] | None = None, edition: str = "",
                    max_rows: int | None = None) -> tuple[list[TopicRow], list[RowError]]:
    """The CSV's topics, of `edition` when given; `defaults` (the CLI's --max-waves and
    friends) apply to every row that does not set its own. `warn` hears about columns that are
    not read. A file of more than `max_rows` rows (RESEARCHFLOW_MAX_CSV_ROWS), good or bad, is
    refused whole: BatchFileError."""
    path = Path(path)
    defaults = (defaults or TopicOptions()).model_dump()
    if not path.is_file():
        raise BatchFileError(f"{path}: no such file; pass a CSV with a 'topic' column")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BatchFileError(f"{path}: cannot be read ({exc.strerror or exc}); pass a CSV "
                             "with a 'topic' column") from exc
    # Bytes that are not UTF-8 stay in the text as surrogates, so only their rows are bad.
    text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    try:
        header, rows = _records(text)
    except csv.Error as exc:
        raise BatchFileError(f"{path}: not a readable CSV ({exc}); save it as UTF-8 with a "
                             "'topic' header") from exc
    fields = [_readable(f).strip().lower() for f in header]
    if not any(fields):
        raise BatchFileError(f"{path}: no header; the first line must be a header with a "
                             "'topic' column")
    if "topic" not in fields:
        hint = ("; the header is not UTF-8: save the file as UTF-8"
                if any(_undecodable(f) for f in header) else "")
        raise BatchFileError(f"{path}: no 'topic' column (found: {', '.join(fields)}); "
                             f"name the column of topics 'topic'{hint}")
    if not rows:
        raise BatchFileError(f"{path}: no topics below the header; add one topic per line")
    if max_rows is not None and len(rows) > max_rows:
        raise BatchFileError(f"{path}: {len(rows):,} rows, more than the {max_rows:,} a batch "
                             "takes (RESEARCHFLOW_MAX_CSV_ROWS); split the file or raise the cap")
    unknown = [f for f in dict.fromkeys(fields) if f and f != "topic" and f not in OVERRIDES]
    if unknown and warn is not None:
        warn(f"{path}: column(s) {', '.join(unknown)} are not read (a row may set topic, "
             f"{', '.join(OVERRIDES)})")

    good: list[TopicRow] = []
    errors: list[RowError] = []
    seen: dict[str, int] = {}
    for line, cells in rows:
        error = _row_error(fields, cells)
        row = dict(zip(fields, (c.strip() for c in cells)))
        text = row.get("topic") or ""
        shown = _readable(text)[:2000]
        key = (stable_id(batch_id, text.strip().lower(), *([edition] if edition else []))
               if text and not error else "")
        if error is None and not text:
            error = "empty topic"
        if error is not None:
            errors.append(RowError(line, error, shown))
            continue
        overrides = {**defaults, **{k: row[k] for k in OVERRIDES if row.get(k)}}
        try:
            topic = Topic(text=text, batch_id=batch_id, edition=edition, **overrides)
        except ValidationError as exc:
            problems = "; ".join(f"{_column(e['loc'])}: {e['msg']}" for e in exc.errors())
            errors.append(RowError(line, problems, shown, key if len(text) <= 2000 else ""))
            continue
        if topic.topic_id in seen:
            errors.append(RowError(line, f"duplicate of row {seen[topic.topic_id]}", shown))
            continue
        seen[topic.topic_id] = line
        good.append(TopicRow(line, topic))
    # A bad row is recorded under its topic's id only when no other row has it.
    used = set(seen)
    for i, error in enumerate(errors):
        if error.key in used:
            errors[i] = replace(error, key="")
        used.add(error.key)
    return good, errors


def _records(text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and each record with its first line number; blank lines are skipped."""
    with _FIELD_LIMIT:
        # Large enough for any cell of this file, so an oversized cell is one bad row
        # (checked in _row_error) and never stops the reader mid-record.
        previous = csv.field_size_limit(max(len(text) + 1, MAX_CELL))
        try:
            reader = csv.reader(text.splitlines(keepends=True))
            header = next(reader, [])
            records = [(_first_line(reader.line_num, cells), cells) for cells in reader
                       if cells]
        finally:
            csv.field_size_limit(previous)
    return header, records


def _row_error(fields: list[str], cells: list[str]) -> str | None:
    """What makes a row unusable before its values are read, or None."""
    if len(cells) > len(fields):
        return "more cells than the header has columns"
    for name, cell in zip(fields, cells):
        column = name or "(unnamed)"
        if _undecodable(cell):
            return (f"column {column}: bytes that are not UTF-8; save the file as UTF-8")
        if len(cell) > MAX_CELL:
            return (f"column {column}: a cell of {len(cell):,} characters (at most "
                    f"{MAX_CELL:,})")
    return None


def _undecodable(text: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in text)


def _readable(text: str) -> str:
    """Text with each byte that was not UTF-8 shown as U+FFFD (printable, storable)."""
    return text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _first_line(line_num: int, cells: list[str]) -> int:
    """The record's first line: csv counts lines read so far, and a quoted cell may span lines."""
    return line_num - sum(c.count("\n") for c in cells)


def _column(loc: tuple) -> str:
    """The CSV column a validation error is about (the Topic field `text` is column `topic`)."""
    name = ".".join(map(str, loc)) or "row"
    return "topic" if name == "text" else name
