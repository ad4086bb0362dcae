"""Report markdown as Prefect's UI can show it: tables become lists.

The UI renders an artifact's markdown tables at the width of its column and clips the rest:
at 1,600 px a four-column comparison showed two. A list of rows, each naming its cells by
their header, reads at any width. The stored report and the exports keep the table.
"""

from __future__ import annotations

import re

_CELL_SPLIT = re.compile(r"(?<!\\)\|")  # a cell's own pipes are escaped (core.text.escaping)
_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip() for cell in _CELL_SPLIT.split(line)]


def tables_as_lists(markdown: str) -> str:
    """Every pipe table of `markdown` as a bullet per row: `- **first cell**` then one
    indented line per other cell, `header: cell`. Everything else stays as written."""
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if (line.lstrip().startswith("|") and i + 1 < len(lines)
                and _RULE.match(lines[i + 1].strip())):
            headers = _cells(line)
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _cells(lines[i])
                out.append(f"- **{cells[0]}**" if cells and cells[0] else "-")
                for header, cell in zip(headers[1:], cells[1:]):
                    cell = cell or "—"
                    out.append(f"  - {header}: {cell}" if header else f"  - {cell}")
                i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out)
