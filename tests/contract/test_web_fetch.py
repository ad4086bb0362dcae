"""The page fetcher against real HTTP on loopback: what a page becomes. An article is extracted
without its boilerplate, PDFs and plain text are read, charsets are decoded, and pages that are
not web pages, too large, unreadable or answered with an HTTP error are refused or reported
unavailable; long text is trimmed at a boundary. How the fetcher behaves toward hosts and the
network (SSRF, redirects, deadlines, per-host limits, robots.txt) is in test_fetch_manners.py,
which imports the helpers and the `server` fixture defined here.

Loopback is exactly what the SSRF guard refuses, so every fetch that must reach a test server
names it on the allow-list (`allow=` below); robots.txt is off, since a ScriptedServer answers
requests in the order they come.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.models import Source
from core.search.web import USER_AGENT, PageRefused, PageUnavailable, fetch_page
from tests.core.test_pdf import PAPER, make_pdf
from tests.fakes.http import Reply, ScriptedServer

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


@pytest.fixture()
def server():
    with ScriptedServer() as srv:
        yield srv


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
