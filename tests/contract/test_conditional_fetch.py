"""Each edition checks its pages again, with conditional requests against a real HTTP server on
loopback: a 304 keeps the stored text, a changed page is read again, a page without validators
is fetched again in full, and within one edition a page is asked for once."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.search.addresses import AllowList
from core.search.cache import CachedFetcher, checking_pages
from core.search.fetch_types import FetchPolicy
from core.search.web import Fetcher
from core.store import PageStore
from tests.fakes.http import Recorded, Reply, ScriptedServer

PAGE = ("<html><head><title>Event loops</title></head><body><article><h1>Event loops</h1>"
        "<p>An event loop waits for {n} events at a time and dispatches them to callbacks, "
        "one callback after another, on a single thread of the process.</p>"
        "</article></body></html>")


@dataclass
class Site:
    """One page with a version; it answers a conditional request for the current one with 304."""

    version: int = 1
    etag: bool = True
    modified: bool = False
    seen: list[dict[str, str]] = field(default_factory=list)

    def __call__(self, rec: Recorded) -> Reply:
        self.seen.append(rec.headers)
        tag = f'"v{self.version}"'
        stamp = f"Mon, 0{self.version} Dec 2026 06:00:00 GMT"
        if (self.etag and rec.headers.get("if-none-match") == tag) or (
                self.modified and rec.headers.get("if-modified-since") == stamp):
            return Reply(304, b"", {"etag": tag} if self.etag else {})
        headers = {"content-type": "text/html; charset=utf-8"}
        if self.etag:
            headers["etag"] = tag
        if self.modified:
            headers["last-modified"] = stamp
        return Reply(200, PAGE.format(n=self.version * 100).encode(), headers)


def fetcher(server: ScriptedServer, db) -> CachedFetcher:
    policy = FetchPolicy(allow=AllowList.parse(server.url.removeprefix("http://")),
                         respect_robots=False)
    return CachedFetcher(Fetcher(policy), PageStore(db), ttl_hours=24)


def test_a_new_edition_asks_with_the_etag_and_a_304_keeps_the_stored_text(tmp_path):
    site = Site()
    with ScriptedServer(default=site) as server:
        url = server.url + "/loop"
        cached = fetcher(server, tmp_path / "store.duckdb")
        with checking_pages("2026-12-01"):
            first = cached(url)
            assert cached(url) == first  # once per edition
        assert len(site.seen) == 1 and "if-none-match" not in site.seen[0]
        assert "100 events" in first.text

        with checking_pages("2026-12-02"):  # unchanged: asked, answered 304
            again = cached(url)
            cached(url)
        assert again == first
        assert len(site.seen) == 2 and site.seen[1]["if-none-match"] == '"v1"'
        assert cached.revalidated == 1 and cached.fetches == 2

        site.version = 2  # the page changes: the next edition reads the new text
        with checking_pages("2026-12-03"):
            changed = cached(url)
        assert site.seen[2]["if-none-match"] == '"v1"' and "200 events" in changed.text

        # A fresh process (a new fetcher over the same store) sends the stored ETag, v2.
        later = fetcher(server, tmp_path / "store.duckdb")
        with checking_pages("2026-12-04"):
            assert later(url) == changed
        assert site.seen[3]["if-none-match"] == '"v2"' and later.revalidated == 1

        # Outside an edition (a lone topic), a page within its TTL is not asked for at all.
        later(url)
        assert len(site.seen) == 4


def test_last_modified_is_sent_back_as_if_modified_since(tmp_path):
    site = Site(etag=False, modified=True)
    with ScriptedServer(default=site) as server:
        url = server.url + "/loop"
        cached = fetcher(server, tmp_path / "store.duckdb")
        with checking_pages("e1"):
            cached(url)
        with checking_pages("e2"):
            cached(url)
    assert site.seen[1]["if-modified-since"] == "Mon, 01 Dec 2026 06:00:00 GMT"
    assert "if-none-match" not in site.seen[1] and cached.revalidated == 1


def test_a_page_without_validators_is_fetched_again_in_full(tmp_path):
    site = Site(etag=False)
    with ScriptedServer(default=site) as server:
        url = server.url + "/loop"
        cached = fetcher(server, tmp_path / "store.duckdb")
        with checking_pages("e1"):
            cached(url)
        site.version = 2
        with checking_pages("e2"):
            page = cached(url)
    assert len(site.seen) == 2 and not {"if-none-match", "if-modified-since"} & set(site.seen[1])
    assert "200 events" in page.text and cached.revalidated == 0
