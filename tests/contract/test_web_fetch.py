"""The page fetcher against real HTTP on loopback: real pages become Sources, hostile ones are
refused, and no page, redirect, slow server or robots.txt can make it reach an address it must not
or run past its deadline.

Loopback is exactly what the SSRF guard refuses, so every fetch that must reach a test server
names it on the allow-list (`allow=` below); robots.txt is off unless a test is about it, since a
ScriptedServer answers requests in the order they come.
"""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.models import Source
from core.search.addresses import AllowList
from core.search.web import (USER_AGENT, FetchPolicy, Fetcher, PageRefused, PageUnavailable,
                             fetch_page)
from core.settings import Settings
from tests.core.test_pdf import PAPER, make_pdf
from tests.fakes.http import Recorded, Reply, ScriptedServer

ARTICLE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Event loops explained | Dev Blog</title></head>
<body>
<header><nav><a href="/">Home</a><a href="/archive">Archive</a><a href="/rss">RSS</a></nav></header>
<main><article>
<h1>Event loops explained</h1>
<p>An event loop waits for events and dispatches them to callbacks. In Python, asyncio runs one
event loop per thread, and coroutines yield control back to it whenever they await.</p>
<p>Because only one callback runs at a time, code between two awaits never races with other
tasks on the same loop. Blocking calls stall every task, which is why CPU-bound work belongs in
an executor.</p>
<p>Libraries such as uvloop replace the default loop with a faster implementation built on
libuv, without changing application code.</p>
</article></main>
<aside>Subscribe to our newsletter for weekly tips!</aside>
<footer>© 2024 Dev Blog. Privacy policy. Terms of use.</footer>
</body></html>"""


def html(body: str | bytes, status: int = 200, ctype: str = "text/html; charset=utf-8") -> Reply:
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return Reply(status, raw, {"content-type": ctype})


def allow(*urls: str) -> str:
    """The allow-list text naming these loopback servers ("127.0.0.1:<port>,...")."""
    return ",".join(u.removeprefix("http://").split("/")[0] for u in urls)


def get(url: str, *, allowed: str | None = None, **kw) -> Source:
    """fetch_page with `url`'s own server allowed and robots.txt off unless asked."""
    kw.setdefault("respect_robots", False)
    return fetch_page(url, allow=allowed if allowed is not None else allow(url), **kw)


def fetcher_for(*urls: str, **kw) -> Fetcher:
    kw.setdefault("respect_robots", False)
    return Fetcher(FetchPolicy(allow=AllowList.parse(allow(*urls)), **kw))


@pytest.fixture()
def server():
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture()
def release():
    """Set at teardown, so handlers that 'hang' do not outlive the test by much."""
    event = threading.Event()
    yield event
    event.set()


def test_real_article_is_extracted_without_boilerplate(server: ScriptedServer) -> None:
    server.push(html(ARTICLE))
    source = get(server.url + "/post", timeout=5)
    assert source.url == server.url + "/post"
    assert "Event loops explained" in source.title
    assert "dispatches them to callbacks" in source.text
    assert "newsletter" not in source.text and "Privacy policy" not in source.text
    sent = server.requests[0]
    assert sent.method == "GET" and sent.headers["user-agent"] == USER_AGENT
    assert USER_AGENT == ("researchflow/0.1 (+https://github.com/researchflow/researchflow; "
                          "research bot)")


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
        assert time.monotonic() - began < 0.2 and site.requests == 1
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
    assert time.monotonic() - began < 0.1
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


# ---- PDFs --------------------------------------------------------------------------------------

def test_pdf_is_read(server: ScriptedServer) -> None:
    server.push(Reply(200, make_pdf(PAPER, title="Async I/O: a field guide"),
                      {"content-type": "application/pdf"}))
    source = get(server.url + "/paper.pdf", timeout=5)
    assert source.title == "Async I/O: a field guide"
    assert "dispatches callbacks one at a time." in source.text
    assert "Coroutines yield control at every await." in source.text


@pytest.mark.parametrize("ctype", ["application/octet-stream", "application/x-pdf", None])
def test_pdf_served_under_other_types_is_read(server: ScriptedServer, ctype: str | None) -> None:
    # None: ScriptedServer sends raw bytes without any content type
    server.push(Reply(200, make_pdf(PAPER), {"content-type": ctype} if ctype else {}))
    source = get(server.url + "/download?id=3", timeout=5)
    assert source.title == "Event loops in practice" and "Blocking calls" in source.text


def test_octet_stream_that_is_not_a_pdf_is_refused(server: ScriptedServer) -> None:
    server.push(Reply(200, b"\x00\x01\x02" * 100, {"content-type": "application/octet-stream"}))
    with pytest.raises(PageRefused, match="not a web page"):
        get(server.url + "/blob", timeout=5)


def test_scanned_pdf_is_refused(server: ScriptedServer) -> None:
    server.push(Reply(200, make_pdf([[], []]), {"content-type": "application/pdf"}))
    with pytest.raises(PageRefused) as info:
        get(server.url + "/scan.pdf", timeout=5)
    assert info.value.reason == "PDF without a text layer (scanned?)"


def test_broken_pdf_is_refused(server: ScriptedServer) -> None:
    server.push(Reply(200, b"%PDF-1.7\n" + b"\x00\x01binary" * 100,
                      {"content-type": "application/pdf"}))
    with pytest.raises(PageRefused) as info:
        get(server.url + "/paper.pdf", timeout=5)
    assert info.value.reason == "unreadable PDF" and not isinstance(info.value, PageUnavailable)


def test_pdf_over_max_bytes_is_refused(server: ScriptedServer) -> None:
    body = make_pdf([[f"Line {i} of a long document." for i in range(40)]] * 30)
    server.push(Reply(200, body, {"content-type": "application/pdf"}))
    with pytest.raises(PageRefused, match="too large"):
        get(server.url + "/big.pdf", timeout=5, max_bytes=len(body) // 2)


# ---- bodies ------------------------------------------------------------------------------------

def test_binary_garbage_served_as_html_is_refused(server: ScriptedServer) -> None:
    garbage = bytes((i * 7919 + 13) % 256 for i in range(20_000))
    server.push(html(garbage))
    with pytest.raises(PageRefused, match="binary"):
        get(server.url + "/g", timeout=5)


def test_oversized_page_is_refused_from_its_declared_length(server: ScriptedServer) -> None:
    server.push(html("<html><body><p>" + "word " * 100_000 + "</p></body></html>"))
    with pytest.raises(PageRefused, match="too large"):
        get(server.url + "/big", timeout=5, max_bytes=50_000)


class _EndlessHandler(BaseHTTPRequestHandler):
    """Streams chunked HTML with no content-length, up to 50 MB, counting what it sent."""

    protocol_version = "HTTP/1.1"
    sent = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        chunk = b"<p>" + b"endless text " * 5000 + b"</p>"
        try:
            self.wfile.write(b"c\r\n<html><body>\r\n")
            for _ in range(50_000_000 // len(chunk)):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                type(self).sent += len(chunk)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client hung up: that is the point


def test_streamed_page_stops_at_max_bytes_without_downloading_it_all() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(PageRefused, match="too large"):
            get(f"http://127.0.0.1:{httpd.server_address[1]}/", timeout=5, max_bytes=200_000)
        time.sleep(0.2)
        assert _EndlessHandler.sent < 10_000_000  # far less than the 50 MB on offer
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_long_text_is_trimmed_at_a_boundary(server: ScriptedServer) -> None:
    paragraphs = "".join(f"<p>Sentence {i} of the long article is here. It says something "
                         f"useful about topic {i}.</p>" for i in range(400))
    server.push(html(f"<html><head><title>Long</title></head><body><article>{paragraphs}"
                     "</article></body></html>"))
    source = get(server.url + "/long", timeout=5, max_chars=2_000)
    assert 1_000 <= len(source.text) <= 2_000
    assert source.text.endswith(".")


@pytest.mark.parametrize("status,kind", [(404, PageRefused), (410, PageRefused),
                                         (503, PageUnavailable), (429, PageUnavailable)])
def test_http_errors(server: ScriptedServer, status: int, kind: type) -> None:
    server.push(html("<html><body><p>Not here, sorry, nothing to read.</p></body></html>", status))
    with pytest.raises(kind) as info:
        get(server.url + "/x", timeout=5)
    assert type(info.value) is kind and str(status) in info.value.reason


def test_script_only_page_has_no_text(server: ScriptedServer) -> None:
    server.push(html("<html><head><script>var a=1;</script></head><body><div id='app'></div>"
                     "<script>render(document.getElementById('app'))</script></body></html>"))
    with pytest.raises(PageRefused, match="no readable text"):
        get(server.url + "/spa", timeout=5)


def test_deeply_nested_markup_does_not_crash(server: ScriptedServer) -> None:
    nested = "<div>" * 20_000 + "<p>Deep inside the nesting there is one sentence.</p>" + \
        "</div>" * 20_000
    server.push(html(f"<html><body>{nested}</body></html>"))
    began = time.perf_counter()
    try:
        source = get(server.url + "/deep", timeout=5)
        assert source.text
    except PageRefused:
        pass  # refusing is fine; crashing or hanging is not
    assert time.perf_counter() - began < 20


def test_wrong_charset_header_is_not_trusted_over_valid_utf8(server: ScriptedServer) -> None:
    page = ("<html><head><title>Café</title></head><body><article><p>Le café naïf de Noël "
            "sert des crêpes à déjeuner, et la façade est rénovée chaque été.</p><p>Une "
            "deuxième phrase assez longue pour que l'extraction garde ce paragraphe entier."
            "</p></article></body></html>")
    server.push(html(page.encode("utf-8"), ctype="text/html; charset=iso-8859-1"))
    assert "café naïf de Noël" in get(server.url + "/fr", timeout=5).text
    server.push(html(page.encode("latin-1"), ctype="text/html; charset=latin-1"))
    assert "crêpes à déjeuner" in get(server.url + "/fr2", timeout=5).text
    server.push(html(page.encode("latin-1"), ctype="text/html; charset=bogus-charset"))
    text = get(server.url + "/fr3", timeout=5).text
    assert "Noël" in text or "No" in text  # decoded somehow, never an exception


def test_plain_text_is_accepted(server: ScriptedServer) -> None:
    server.push(Reply(200, "Release notes\n\nVersion 2 fixes the event loop leak.",
                      {"content-type": "text/plain; charset=utf-8"}))
    source = get(server.url + "/notes.txt", timeout=5)
    assert source.title == "Release notes" and "event loop leak" in source.text


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
