"""Read a CSV of topics: every good row becomes a Topic, every bad row a RowError.

One bad row never sinks the batch: it is reported with its row number and what to fix, and the
other rows still run. Only a file that cannot be a topic list at all (missing, unreadable, no
`topic` column) raises `BatchFileError`.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from core.models import TOPIC_OPTIONS, Topic, TopicOptions

# Per-row columns a CSV may carry (the fields of TopicOptions); a row's value wins over the
# batch's default.
OVERRIDES = TOPIC_OPTIONS


class BatchFileError(ValueError):
    """The CSV as a whole is unusable; the message says what to do."""


@dataclass(frozen=True)
class RowError:
    row: int  # 1-based line number in the file, header = 1
    message: str


@dataclass(frozen=True)
class TopicRow:
    row: int
    topic: Topic


def read_topics_csv(path: Path, *, batch_id: str, defaults: TopicOptions | None = None,
                    ) -> tuple[list[TopicRow], list[RowError]]:
    """The CSV's topics; `defaults` (the CLI's --max-waves and friends) apply to every row that
    does not set its own."""
    path = Path(path)
    defaults = (defaults or TopicOptions()).model_dump()
    if not path.is_file():
        raise BatchFileError(f"{path}: no such file; pass a CSV with a 'topic' column")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            # From the header itself: a first row with extra cells has a None key.
            fields = [(f or "").strip().lower() for f in reader.fieldnames or ()]
            rows = [(_first_line(reader.line_num, raw), raw) for raw in reader]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise BatchFileError(f"{path}: not a readable UTF-8 CSV ({exc}); save it as UTF-8 "
                             "with a 'topic' header") from exc
    if not any(fields):
        raise BatchFileError(f"{path}: no header; the first line must be a header with a "
                             "'topic' column")
    if "topic" not in fields:
        raise BatchFileError(f"{path}: no 'topic' column (found: {', '.join(fields)}); "
                             "name the column of topics 'topic'")
    if not rows:
        raise BatchFileError(f"{path}: no topics below the header; add one topic per line")

    good: list[TopicRow] = []
    errors: list[RowError] = []
    seen: dict[str, int] = {}
    for line, raw in rows:
        row = {(k or "").strip().lower(): (v or "").strip() if isinstance(v, str) else v
               for k, v in raw.items()}
        if None in raw:  # more cells than header columns
            errors.append(RowError(line, "more cells than the header has columns"))
            continue
        text = row.get("topic") or ""
        if not text:
            errors.append(RowError(line, "empty topic"))
            continue
        overrides = {**defaults, **{k: row[k] for k in OVERRIDES if row.get(k)}}
        try:
            topic = Topic(text=text, batch_id=batch_id, **overrides)
        except ValidationError as exc:
            problems = "; ".join(f"{_column(e['loc'])}: {e['msg']}" for e in exc.errors())
            errors.append(RowError(line, problems))
            continue
        if topic.topic_id in seen:
            errors.append(RowError(line, f"duplicate of row {seen[topic.topic_id]}"))
            continue
        seen[topic.topic_id] = line
        good.append(TopicRow(line, topic))
    return good, errors


def _first_line(line_num: int, raw: dict) -> int:
    """The record's first line: csv counts lines read so far, and a quoted cell may span lines."""
    cells = [v for v in raw.values() if isinstance(v, str)]
    cells += [v for extra in raw.values() if isinstance(extra, list) for v in extra]
    return line_num - sum(c.count("\n") for c in cells)


def _column(loc: tuple) -> str:
    """The CSV column a validation error is about (the Topic field `text` is column `topic`)."""
    name = ".".join(map(str, loc)) or "row"
    return "topic" if name == "text" else name
