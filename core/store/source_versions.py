"""Which version of a page a quote was taken from, and whether the quote is still there.

A page's text is stored once per (url, content hash) in `sources` (schema v13), so a new
edition that reads a changed page adds a version instead of overwriting the text the earlier
editions quoted. A citation, and each item of a finding's stored evidence, names the version
it quoted by its `content_hash`.

What it does: `content_hash` is a version's name (the SQL of the v13 migration computes the
same value: `left(sha256(text), 16)`); `Versions` picks, among the pages a topic read, the
version holding a quote; `unverified` lists the citations of a report whose quote is not in
the version they cite (the `citation_quotes` view decides, so SQL users see the same verdict).

What it does not do: fetch or compare pages (core.search), or decide what an edition changed
(core.reports.editions).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

import duckdb

from core.models import Source
from core.store.connection import dicts

# The whitespace DuckDB's regular expressions call \s: quotes are compared with runs of it
# collapsed on both sides (extraction reflows lines), here as in the view.
_SPACE = re.compile(r"[\t\n\f\r ]+")


def content_hash(text: str) -> str:
    """A version's name: the first 16 hex digits of the SHA-256 of its UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _collapsed(text: str) -> str:
    return _SPACE.sub(" ", text)


class Versions:
    """The versions of each page one topic read, to find the one a quote came from."""

    def __init__(self, sources: Iterable[Source]) -> None:
        self._by_url: dict[str, list[tuple[str, str]]] = {}  # url -> [(hash, collapsed text)]
        for source in sources:
            found = self._by_url.setdefault(source.url, [])
            digest = content_hash(source.text)
            if all(digest != known for known, _ in found):
                found.append((digest, _collapsed(source.text)))

    def of(self, url: str, quote: str) -> str | None:
        """The hash of the version of `url` that holds `quote` (the latest read when several
        do); when none does, the latest read, which `unverified` will report. None: the topic
        never read `url`."""
        found = self._by_url.get(url)
        if not found:
            return None
        wanted = _collapsed(quote).strip(" ")
        holding = [digest for digest, text in found if wanted and wanted in text]
        return (holding or [found[-1][0]])[-1]


def unverified(con: duckdb.DuckDBPyConnection, report_id: str) -> list[dict[str, Any]]:
    """A report's citations whose quote is not verbatim in the version of the page they cite
    (whitespace runs collapsed), with `reason`: 'source not stored', 'empty quote' or 'quote
    not in source text'; ordered by reference number."""
    return dicts(con.execute(
        "SELECT number, url, title, quote, content_hash, reason FROM citation_quotes "
        "WHERE report_id = ? AND NOT verified ORDER BY number", [report_id]))
