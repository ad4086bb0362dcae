"""What a stored report rests on, read back for comparing editions (core.reports.editions)."""

from __future__ import annotations

import json

import duckdb

from core.reports.editions import ClaimView, Snapshot, citations_of


def snapshot_from(con: duckdb.DuckDBPyConnection, report_id: str) -> Snapshot | None:
    """The sources its topic read, its claims with their evidence and its references; None for
    an unknown report."""
    found = con.execute("SELECT topic_id, coalesce(edition, '') FROM reports "
                        "WHERE report_id = ?", [report_id]).fetchone()
    if found is None:
        return None
    topic_id, edition = found
    # Each page as this report's topic read it: the version it read, not the page's latest.
    sources = dict(con.execute(
        "SELECT s.url, coalesce(s.title, '') FROM topic_sources ts JOIN sources s "
        "ON s.source_id = ts.source_id AND s.content_hash = ts.content_hash "
        "WHERE ts.topic_id = ? ORDER BY s.url, s.last_seen", [topic_id]).fetchall())
    claims = []
    for subquestion, claim, evidence in con.execute(
            "SELECT subquestion, claim, evidence FROM findings WHERE topic_id = ? "
            "AND claim IS NOT NULL ORDER BY subquestion_index, claim_index",
            [topic_id]).fetchall():
        try:
            items = json.loads(evidence or "[]")
        except ValueError:
            items = []
        quotes = tuple((str(e.get("url", "")), str(e.get("quote", "")))
                       for e in items if isinstance(e, dict))
        claims.append(ClaimView(subquestion or "", claim, quotes))
    cited = citations_of(con.execute("SELECT number, url, quote FROM citations "
                                     "WHERE report_id = ? ORDER BY number",
                                     [report_id]).fetchall())
    return Snapshot(report_id, edition, sources, tuple(claims), cited)
