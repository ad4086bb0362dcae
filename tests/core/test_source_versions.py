"""Versioned sources (schema v13) on real DuckDB files: a changed page adds a version instead of
overwriting the text earlier reports quoted, each quote names the version it came from, and a
v12 file keeps its texts as one version each."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from core.models import Source
from core.store import SCHEMA_VERSION, ResultStore, query_readonly
from core.store import migrations
from core.store.source_versions import Versions, content_hash
from tests.core.test_store import SHARED, make_result
from tests.core.test_store_ledger import make_v1_file


@pytest.fixture
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "rf.duckdb")


def test_a_changed_page_is_a_new_version_and_old_quotes_stay_verified(store: ResultStore) -> None:
    """A page whose text changed between two topics' reads is kept in both versions; each
    citation and each finding's evidence name the version quoted, so both reports verify."""
    first = store.save_result(make_result("Topic number one"), run_id="r1", engine="offline")
    other = Source(url="https://example.org/other", title="Other", text="other text")
    newer = Source(url=SHARED.url, title="DuckDB concurrency v2",
                   text="DuckDB allows one process to write, and now says more.")
    second = make_result("Topic number two", extra_source=other).model_copy(
        update={"sources": (newer, other)})
    second_id = store.save_result(second, run_id="r2", engine="offline")
    counts = store.counts()
    assert counts["sources"] == 3 and counts["topic_sources"] == 3
    _, rows = query_readonly(store.path, "SELECT title, text FROM sources "
                                         f"WHERE source_id = '{SHARED.source_id}' ORDER BY title")
    assert rows == [(SHARED.title, SHARED.text), (newer.title, newer.text)]
    old_hash, new_hash = content_hash(SHARED.text), content_hash(newer.text)
    assert old_hash != new_hash
    _, cited = query_readonly(store.path, "SELECT report_id, content_hash FROM citations "
                                          "ORDER BY report_id = ?", [second_id])
    assert cited == [(first, old_hash), (second_id, new_hash)]
    _, evidence = query_readonly(store.path, "SELECT evidence FROM findings WHERE claim_index = 0 "
                                             "AND subquestion_index = 0 ORDER BY topic_id = ?",
                                 [second.topic.topic_id])
    assert [json.loads(e)[0]["content_hash"] for (e,) in evidence] == [old_hash, new_hash]
    # The first report's quote is checked against the text it quoted, not the page's latest.
    assert store.unverified_citations(first) == []
    assert store.unverified_citations(second_id) == []
    # Each topic's snapshot names the page as it read it.
    assert store.snapshot(first).sources[SHARED.url] == SHARED.title
    assert store.snapshot(second_id).sources[SHARED.url] == newer.title
    _, versions = query_readonly(store.path, "SELECT n, content_hash, reports FROM "
                                             "source_versions WHERE url = ? ORDER BY n",
                                 [SHARED.url])
    assert versions == [(1, old_hash, [first]), (2, new_hash, [second_id])]


def test_a_quote_names_the_version_holding_it_when_a_topic_read_two() -> None:
    """A topic may hold two versions of one page (a cached step read the old one): each quote
    names the version it is in, the latest read when both hold it."""
    old = Source(url="https://example.org/p", title="P", text="It waits 7 ms. It is fast.")
    new = Source(url="https://example.org/p", title="P", text="It waits 9 ms. It is fast.")
    versions = Versions([old, new])
    assert versions.of(old.url, "It waits 7 ms.") == content_hash(old.text)
    assert versions.of(old.url, "It waits 9 ms.") == content_hash(new.text)
    assert versions.of(old.url, "It  is\nfast.") == content_hash(new.text)
    assert versions.of(old.url, "Invented.") == content_hash(new.text)  # unverified later
    assert versions.of("https://example.org/unread", "It is fast.") is None


def make_v12_file(path: Path) -> None:
    """A version-12 store (the frozen steps from a v1 file) with a second topic quoting two
    pages, as the v12 code wrote it: one text per URL, quotes naming no version."""
    make_v1_file(path)
    con = duckdb.connect(str(path))
    for step in range(1, 12):
        migrations.MIGRATIONS[step](con)
    evidence = [{"url": "https://example.org/a", "title": "A", "quote": "text a", "section": ""},
                {"url": "https://example.org/b", "title": "B", "quote": "text b", "section": ""},
                {"url": "https://example.org/unstored", "title": "U", "quote": "u"}]
    con.execute("INSERT INTO sources VALUES ('s2', 'https://example.org/b', 'B', 'text b', "
                "now(), now())")
    con.execute("INSERT INTO topic_sources VALUES ('t-two', 's1'), ('t-two', 's2')")
    con.execute("INSERT INTO findings VALUES ('t-two', 0, 'Why?', 0, 'Both.', 'high', ?, '')",
                [json.dumps(evidence)])
    con.execute("INSERT INTO reports (report_id, batch_id, topic_id, topic, markdown, "
                "created_at) VALUES ('rep-two', 'b1', 't-two', 'Two', '# Two', now())")
    con.execute("INSERT INTO citations VALUES ('rep-two', 1, 'https://example.org/b', 'B', "
                "'text  b'), ('rep-two', 2, 'https://example.org/unstored', 'U', 'u')")
    con.execute("UPDATE meta SET value = '12' WHERE key = 'schema_version'")
    con.close()


def test_a_v12_file_keeps_each_text_as_the_one_version_its_quotes_name(tmp_path: Path) -> None:
    path = tmp_path / "v12.duckdb"
    make_v12_file(path)
    _, before = query_readonly(path, "SELECT source_id, url, title, text, first_seen, last_seen "
                                     "FROM sources ORDER BY source_id")
    store = ResultStore(path)
    assert store.schema_version() == SCHEMA_VERSION == 14
    _, after = query_readonly(path, "SELECT source_id, url, title, text, first_seen, last_seen "
                                    "FROM sources ORDER BY source_id")
    assert after == before
    a, b = content_hash("text a"), content_hash("text b")
    assert query_readonly(path, "SELECT source_id, content_hash FROM sources ORDER BY 1")[1] \
        == [("s1", a), ("s2", b)]
    assert query_readonly(path, "SELECT topic_id, source_id, content_hash FROM topic_sources "
                                "ORDER BY ALL")[1] == [
        ("t-ok", "s1", a), ("t-two", "s1", a), ("t-two", "s2", b)]
    assert query_readonly(path, "SELECT report_id, number, content_hash FROM citations "
                                "ORDER BY ALL")[1] == [
        ("rep-ok", 1, a), ("rep-two", 1, b), ("rep-two", 2, None)]
    [(evidence,)] = query_readonly(path, "SELECT evidence FROM findings "
                                         "WHERE topic_id = 't-two'")[1]
    assert [e.get("content_hash") for e in json.loads(evidence)] == [a, b, None]
    # The old quotes check against the versions they now name; the unstored page says so.
    assert store.unverified_citations("rep-ok") == []
    [missing] = store.unverified_citations("rep-two")
    assert (missing["number"], missing["reason"]) == (2, "source not stored")
    assert query_readonly(path, "SELECT url, n, reports FROM source_versions ORDER BY url")[1] \
        == [("https://example.org/a", 1, ["rep-ok"]), ("https://example.org/b", 1, ["rep-two"])]
