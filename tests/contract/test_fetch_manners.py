"""The page fetcher against real HTTP on loopback: how it behaves toward hosts and the network.
No URL, redirect or robots.txt makes it reach an address it must not (non-HTTP schemes, loopback
off the allow-list, redirects to internal addresses); redirects are followed up to a limit and
loops stop at the first repeat; hanging, slow, trickling and stalled servers stop at the read
timeout or the page deadline, and a host that timed out or looped is not asked again in the run
(a 404 or a refusal does not count against it); at most `max_per_host` requests reach one host at
once; robots.txt is fetched once per host and obeyed, redirect targets included; connection
failures are reported unavailable; and the fetch policy is read from the settings.

Loopback is exactly what the SSRF guard refuses, so every fetch that must reach a test server
names it on the allow-list (`allow=` below); robots.txt is off unless a test is about it, since a
ScriptedServer answers requests in the order they come. The page helpers and the per-test
`server` fixture come from test_web_fetch.py.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from core.search.addresses import AllowList
from core.search.web import (USER_AGENT, FetchPolicy, Fetcher, PageRefused, PageUnavailable,
                             fetch_page)
from core.settings import Settings
from tests.contract import test_web_fetch as pages
from tests.contract.test_web_fetch import ARTICLE, allow, get, html
from tests.fakes.http import Recorded, Reply, ScriptedServer

server = pages.server  # the same per-test server fixture, not the module-wide one in conftest.py


def fetcher_for(*urls: str, **kw) -> Fetcher:
    kw.setdefault("respect_robots", False)
    return Fetcher(FetchPolicy(allow=AllowList.parse(allow(*urls)), **kw))


@pytest.fixture()
def release():
    """Set at teardown, so handlers that 'hang' do not outlive the test by much."""
    event = threading.Event()
    yield event
    event.set()


# ---- redirects and schemes ---------------------------------------------------------------------

def test_redirects_are_followed_and_the_final_url_kept(server: ScriptedServer) -> None:
    server.push(Reply(301, b"", {"location": "/moved"}), Reply(302, b"", {"location": "/final"}),
                html(ARTICLE))
    source = get(server.url + "/start", timeout=5)
    assert source.url == server.url + "/final"
    assert [r.path for r in server.requests] == ["/start", "/moved", "/final"]


def test_redirect_loops_stop_at_the_first_repeat(server: ScriptedServer) -> None:
    server.default = Reply(302, b"", {"location": "/again"})
    began = time.monotonic()
    with pytest.raises(PageUnavailable, match="redirect loop"):
        get(server.url + "/again", timeout=5, max_redirects=3)
    assert len(server.requests) == 1 and time.monotonic() - began < 1
    server.push(Reply(302, b"", {"location": "/b"}), Reply(302, b"", {"location": "/a#frag"}))
    with pytest.raises(PageUnavailable, match="redirect loop"):
        get(server.url + "/a", timeout=5)
    assert [r.path for r in server.requests[1:]] == ["/a", "/b"]


def test_redirect_chains_stop_at_max_redirects(server: ScriptedServer) -> None:
    server.default = lambda rec: Reply(302, b"", {"location": rec.path + "x"})
    with pytest.raises(PageUnavailable, match="more than 3 redirects"):
        get(server.url + "/r", timeout=5, max_redirects=3)
    assert len(server.requests) == 4


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://example.com/x", "javascript:x"])
def test_non_http_schemes_are_refused(server: ScriptedServer, target: str) -> None:
    with pytest.raises(PageRefused, match="scheme"):
        fetch_page(target, timeout=5)
    server.push(Reply(302, b"", {"location": target}))
    with pytest.raises(PageRefused) as info:  # "unsupported scheme" or "invalid URL"
        get(server.url + "/r", timeout=5)
    assert not isinstance(info.value, PageUnavailable)


# ---- SSRF --------------------------------------------------------------------------------------

def test_loopback_without_the_allow_list_is_refused_before_any_request(
        server: ScriptedServer) -> None:
    server.default = html(ARTICLE)
    with pytest.raises(PageRefused) as info:
        fetch_page(server.url + "/post", timeout=5, respect_robots=False)
    assert type(info.value) is PageRefused and info.value.reason.startswith("unsafe address")
    with pytest.raises(PageRefused, match="unsafe address"):
        fetch_page(server.url + "/post", timeout=5)  # robots.txt on: not asked for either
    assert server.requests == []


def test_redirect_to_a_loopback_port_not_on_the_list_is_refused_at_that_hop(
        server: ScriptedServer) -> None:
    with ScriptedServer(default=html(ARTICLE)) as other:
        server.push(Reply(302, b"", {"location": other.url + "/admin"}))
        with pytest.raises(PageRefused) as info:
            get(server.url + "/start", timeout=5)
        assert type(info.value) is PageRefused and "unsafe address" in info.value.reason
        assert info.value.url == other.url + "/admin"
        assert [r.path for r in server.requests] == ["/start"] and other.requests == []
        # the same hop with both servers allowed is followed
        server.push(Reply(302, b"", {"location": other.url + "/admin"}))
        assert get(server.url + "/start", allowed=allow(server.url, other.url)).url == \
            other.url + "/admin"


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/",
                                    "http://[::1]/", "http://10.0.0.1:8080/x",
                                    "http://0.0.0.0/"])
def test_redirect_to_internal_addresses_is_refused(server: ScriptedServer, target: str) -> None:
    server.push(Reply(302, b"", {"location": target}))
    fetcher = fetcher_for(server.url, deadline=5)
    with pytest.raises(PageRefused) as info:
        fetcher(server.url + "/start")
    assert type(info.value) is PageRefused and "unsafe address" in info.value.reason
    assert len(server.requests) == 1
    # a refusal is not a failure of the host: its other pages are still read
    server.push(html(ARTICLE))
    assert fetcher(server.url + "/post").text
    assert fetcher.stats.snapshot()["refusals"] == {"unsafe address": 1}
    fetcher.close()


# ---- time bounds -------------------------------------------------------------------------------

def test_hanging_page_stops_at_the_deadline(server: ScriptedServer, release) -> None:
    def hang(rec: Recorded) -> Reply:
        release.wait(30)
        return html(ARTICLE)

    server.default = hang
    began = time.monotonic()
    with pytest.raises(PageUnavailable) as info:  # robots.txt on: it hangs too
        fetch_page(server.url + "/slow", allow=allow(server.url), deadline=1.5)
    assert time.monotonic() - began < 3
    assert "deadline exceeded" in info.value.reason or "timed out" in info.value.reason


class _Trickle:
    """A raw socket server: HTTP headers, then `first` bytes, then one byte every `every`
    seconds (never, when every is None) for up to a minute."""

    def __init__(self, every: float | None, first: bytes = b"<html><body><p>") -> None:
        self.every, self.first = every, first
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        self.requests += 1
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"
                             b"connection: close\r\n\r\n" + self.first)
                for _ in range(300):
                    if self.stop.wait(self.every if self.every else 60):
                        return
                    conn.sendall(b"a")
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("every", [0.2, None], ids=["trickling", "stalled"])
def test_a_body_that_never_ends_stops_at_the_deadline(every: float | None) -> None:
    site = _Trickle(every)
    try:
        fetcher = fetcher_for(site.url, deadline=1.5, read_timeout=10)
        began = time.monotonic()
        with pytest.raises(PageUnavailable, match="deadline exceeded"):
            fetcher(site.url + "/")
        assert time.monotonic() - began < 3
        # and the host is not asked again in this run
        began = time.monotonic()
        with pytest.raises(PageUnavailable, match="host failed earlier in this run"):
            fetcher(site.url + "/other")
        # the request count says nothing was sent; the time, that nothing waited (under 3 test
        # workers on 2 cores a process can wait its turn for tens of milliseconds)
        assert time.monotonic() - began < 0.75 and site.requests == 1
        fetcher.close()
    finally:
        site.close()


def test_after_a_timeout_the_host_fails_fast(server: ScriptedServer, release) -> None:
    def hang(rec: Recorded) -> Reply:
        release.wait(30)
        return html(ARTICLE)

    server.push(hang)
    server.default = html(ARTICLE)
    fetcher = fetcher_for(server.url, read_timeout=0.5, deadline=5)
    with pytest.raises(PageUnavailable, match="timed out"):
        fetcher(server.url + "/slow")
    began = time.monotonic()
    with pytest.raises(PageUnavailable) as info:
        fetcher(server.url + "/fine")
    assert time.monotonic() - began < 0.4  # not the 0.5 s read timeout again (load: see above)
    assert info.value.reason == "host failed earlier in this run: timed out"
    assert [r.path for r in server.requests] == ["/slow"]
    assert fetcher.hosts.failed_hosts() == {allow(server.url): "timed out"}
    fetcher.close()


def test_a_redirect_loop_marks_the_host(server: ScriptedServer) -> None:
    server.push(Reply(302, b"", {"location": "/loop"}))
    server.default = html(ARTICLE)
    with fetcher_for(server.url) as fetcher:
        with pytest.raises(PageUnavailable, match="redirect loop"):
            fetcher(server.url + "/loop")
        with pytest.raises(PageUnavailable, match="host failed earlier.*redirect loop"):
            fetcher(server.url + "/post")
    assert len(server.requests) == 1


def test_404_and_refusals_do_not_mark_the_host(server: ScriptedServer) -> None:
    server.push(html("<html><body><p>Not here.</p></body></html>", 404),
                Reply(200, b"\x00\x01", {"content-type": "image/png"}), html(ARTICLE))
    with fetcher_for(server.url) as fetcher:
        with pytest.raises(PageRefused, match="HTTP 404"):
            fetcher(server.url + "/missing")
        with pytest.raises(PageRefused, match="not a web page"):
            fetcher(server.url + "/logo.png")
        assert fetcher(server.url + "/post").text
        assert fetcher.hosts.failed_hosts() == {}


def test_slow_server_times_out(server: ScriptedServer) -> None:
    def slow(_: Recorded) -> Reply:
        time.sleep(1.5)
        return html(ARTICLE)

    server.push(slow)
    with pytest.raises(PageUnavailable, match="timed out|deadline exceeded"):
        get(server.url + "/slow", timeout=0.3)


# ---- per-host concurrency ----------------------------------------------------------------------

def test_at_most_max_per_host_requests_reach_one_host_at_once(server: ScriptedServer) -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def slow(rec: Recorded) -> Reply:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.3)
        with lock:
            state["now"] -= 1
        if rec.path == "/robots.txt":
            return Reply(404, "none")
        return html(ARTICLE)

    server.default = slow
    results: list[object] = []
    with fetcher_for(server.url, max_per_host=2, respect_robots=True) as fetcher:
        threads = [threading.Thread(target=lambda i=i: results.append(
            fetcher(f"{server.url}/p{i}"))) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = fetcher.stats.snapshot()
    assert len(results) == 6 and state["peak"] == 2
    assert stats["requests"] == {allow(server.url): 7} and stats["pages"] == 6
    assert stats["bytes_downloaded"] > 6 * len(ARTICLE) // 2


# ---- robots.txt --------------------------------------------------------------------------------

def robots_site(rules: str | None):
    def handler(rec: Recorded) -> Reply:
        if rec.path == "/robots.txt":
            return Reply(200, rules) if rules is not None else Reply(404, "not found")
        return html(ARTICLE)
    return handler


def test_robots_disallow_is_respected_and_fetched_once() -> None:
    with ScriptedServer(default=robots_site("User-agent: *\nDisallow: /private\n")) as site:
        with fetcher_for(site.url, respect_robots=True) as fetcher:
            with pytest.raises(PageRefused) as info:
                fetcher(site.url + "/private/x")
            assert info.value.reason == "disallowed by robots.txt"
            assert not isinstance(info.value, PageUnavailable)
            for i in range(5):
                assert fetcher(f"{site.url}/public/{i}").text
            assert fetcher.hosts.failed_hosts() == {}
        paths = [r.path for r in site.requests]
        assert paths.count("/robots.txt") == 1 and "/private/x" not in paths
        assert paths[0] == "/robots.txt" and len(paths) == 6


def test_robots_off_fetches_disallowed_pages() -> None:
    with ScriptedServer(default=robots_site("User-agent: *\nDisallow: /\n")) as site:
        assert get(site.url + "/private/x", respect_robots=False).text
        assert [r.path for r in site.requests] == ["/private/x"]


def test_missing_robots_allows_everything() -> None:
    with ScriptedServer(default=robots_site(None)) as site:
        with fetcher_for(site.url, respect_robots=True) as fetcher:
            assert fetcher(site.url + "/private/x").text and fetcher(site.url + "/y").text
        assert [r.path for r in site.requests] == ["/robots.txt", "/private/x", "/y"]


def test_robots_applies_to_redirect_targets() -> None:
    def handler(rec: Recorded) -> Reply:
        if rec.path == "/robots.txt":
            return Reply(200, "User-agent: *\nDisallow: /private\n")
        if rec.path == "/go":
            return Reply(302, b"", {"location": "/private/page"})
        return html(ARTICLE)

    with ScriptedServer(default=handler) as site:
        with pytest.raises(PageRefused, match="disallowed by robots.txt"):
            get(site.url + "/go", respect_robots=True)
        assert [r.path for r in site.requests] == ["/robots.txt", "/go"]


# ---- network errors ----------------------------------------------------------------------------

def test_network_errors_are_unavailable_not_crashes() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(PageUnavailable, match="network error"):
        get(f"http://127.0.0.1:{port}/", timeout=2)


# ---- the policy --------------------------------------------------------------------------------

def test_policy_from_settings() -> None:
    settings = Settings(fetch_allow_hosts="127.0.0.1:8080,wiki.internal", respect_robots=False,
                        max_fetches_per_host=3, fetch_connect_timeout=2.5,
                        fetch_read_timeout=7.0, page_deadline=12.0, max_redirects=4,
                        max_page_bytes=1_000, max_source_chars=500)
    policy = FetchPolicy.from_settings(settings)
    assert (policy.connect_timeout, policy.read_timeout, policy.deadline) == (2.5, 7.0, 12.0)
    assert (policy.max_redirects, policy.max_bytes, policy.max_chars) == (4, 1_000, 500)
    assert policy.max_per_host == 3 and policy.respect_robots is False
    assert policy.allow.allows("127.0.0.1", 8080) and not policy.allow.allows("127.0.0.1", 8081)
    assert policy.user_agent == USER_AGENT
    default = FetchPolicy.from_settings(Settings())
    assert default.respect_robots and default.max_per_host == 2 and default.deadline == 20.0
    assert not default.allow.allows("127.0.0.1", 8080)


def test_fetch_page_rejects_unknown_options() -> None:
    with pytest.raises(TypeError, match="bogus"):
        fetch_page("http://example.com/", bogus=1)
