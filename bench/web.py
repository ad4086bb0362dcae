"""Benchmark: the web layer on a site with the traps a real crawl meets, over two runs.

Two related topics run one after the other (two flow runs, as two scheduled jobs would) in web
mode — the real serpapi client against a loopback SerpAPI-compatible server, the offline engine,
`--max-pages` 6 — over a loopback site serving: four articles (one also linked with tracking
parameters), a 6 MB page, a redirect to a private address, a redirect loop, a page that hangs
and a PDF paper, with results naming the cloud-metadata address, private and loopback addresses
(`localhost`, `127.0.0.2`, the stand-ins a hostile result would name) and a file: URL. The first
six results are traps but two; the PDF and two articles come after them. The hang and the loop
are on hosts of their own. Only the three hosts' `127.0.0.1:<port>` are allow-listed. It prints:

- per sub-question: readable pages read against readable pages offered (target: all), and the
  pages tried (readable or not) against the attempt bound (2 x max pages);
- requests the site saw per distinct page over both runs (target: 1 for every page);
- requests to the private stand-ins, and stored sources on private addresses (target: 0);
- bytes the site sent, and what the caps and the cache saved;
- whether the PDF's text was stored; wall time of each run; citations and how many are verbatim.

    python bench/web.py [--max-pages 6]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make core/ and tests.fakes importable
    sys.path.insert(0, str(ROOT))

HANG_SECONDS = 12
PDF_SENTENCE = "Event loops multiplex many sockets on one thread with readiness notification."
ARTICLES = {
    "/threads": ("Threads in practice", [
        "Threads in one process share memory, so a lock must guard data that two threads change.",
        "A thread that waits on a socket releases the interpreter lock while it waits.",
        "Starting a thread is cheaper than starting a process but costs more than a coroutine."]),
    "/asyncio": ("Asyncio in practice", [
        "Asyncio runs every coroutine on one event loop in a single thread.",
        "A coroutine yields control at each await, which lets thousands of sockets wait at once.",
        "A blocking call inside a coroutine stalls the whole event loop until it returns."]),
    "/sockets": ("Waiting on sockets", [
        "Waiting on many sockets with threads costs one stack of memory per thread.",
        "An asyncio server waits on ten thousand sockets with a few megabytes of memory."]),
    "/pools": ("Thread pools", [
        "A thread pool bounds how many threads wait on sockets at the same time.",
        "Asyncio can hand blocking calls to a thread pool with run_in_executor."]),
}
TOPICS = ("Threading vs asyncio for waiting on many sockets",
          "How do threads and asyncio wait on sockets")


def _article(title: str, sentences: list[str]) -> bytes:
    body = "".join(f"<p>{s}</p>" for s in sentences)
    return (f"<html><head><title>{title}</title></head><body><nav>Home | Blog</nav><article>"
            f"<h1>{title}</h1>{body}</article><footer>Copyright 2026</footer></body></html>"
            ).encode()


def minimal_pdf(title: str, lines: list[str]) -> bytes:
    """A small valid PDF with a text layer and a /Title, written by hand (no library)."""
    text = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
    stream = f"BT /F1 11 Tf 72 720 Td {text} ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               f"<< /Title ({title}) >>".encode()]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += (b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n"
            % (len(objects) + 1, xref))
    return bytes(out)


class Site:
    """The loopback site: counts requests and bytes per path."""

    def __init__(self) -> None:
        from tests.fakes.http import Reply

        self.Reply = Reply
        self.requests: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.pages = {path: _article(t, s) for path, (t, s) in ARTICLES.items()}
        self.pages["/bloated"] = _article("Bloated", ["A sentence that pads a bloated page."]
                                          * 150_000)
        self.pages["/paper.pdf"] = minimal_pdf("Readiness notification in event loops",
                                               [PDF_SENTENCE, "Threads block while they wait."])
        self.pages["/secret"] = b"<html><body><p>AWS_SECRET_ACCESS_KEY=leaked</p></body></html>"
        self.searches: list = []  # the SerpAPI stand-in's requests, once serving
        self.private_url = ""  # where /go redirects: a private address (set once serving)

    def __call__(self, rec):
        path = urlsplit(rec.path).path.rstrip("/") or "/"  # /pools/ is /pools, as on most sites
        with self.lock:
            self.requests[path] += 1
        if path == "/go":  # a link shortener pointing at a private address
            return self.Reply(302, b"", {"location": f"{self.private_url}/secret"})
        if path == "/loop":
            return self.Reply(302, b"", {"location": "/loop2"})
        if path == "/loop2":
            return self.Reply(302, b"", {"location": "/loop"})
        if path == "/hang":
            time.sleep(HANG_SECONDS)
            return self.Reply(200, _article("Late", ["This page answered far too late."]),
                              {"content-type": "text/html"})
        if path == "/robots.txt":
            return self.Reply(404, b"", {"content-type": "text/plain"})
        body = self.pages.get(path)
        if body is None:
            return self.Reply(404, b"not found", {"content-type": "text/html"})
        with self.lock:
            self.sent[path] += len(body)
        ctype = "application/pdf" if path.endswith(".pdf") else "text/html; charset=utf-8"
        return self.Reply(200, body, {"content-type": ctype})


def results(site_url: str, traps_url: str, loop_url: str, port: int) -> list[dict]:
    # The hang and the loop live on their own hosts, as on the web: a host that hangs or loops
    # is not tried again within the run, which must not cost the articles.
    links = ["http://169.254.169.254/latest/meta-data/iam/security-credentials/",
             f"{site_url}/threads",
             f"{site_url}/threads?utm_source=news&utm_medium=email&fbclid=abc123",
             f"{site_url}/bloated", f"{site_url}/go", f"http://localhost:{port}/secret",
             f"{site_url}/asyncio", f"{site_url}/paper.pdf", f"{site_url}/sockets#waiting",
             f"{site_url}/pools/", f"{traps_url}/hang", f"{loop_url}/loop",
             f"http://127.0.0.2:{port}/secret", "file:///etc/passwd"]
    return [{"position": i + 1, "title": f"Result {i + 1}", "link": link,
             "snippet": "threads asyncio sockets waiting"} for i, link in enumerate(links)]


READABLE = (*ARTICLES, "/paper.pdf")
_LISTED = re.compile(r"^\d+\. .* <([^<>\s]+)>", re.M)  # a search listing's line
_READ = re.compile(r"^Source: .* <([^<>\s]+)>$", re.M)  # a page read with text
_TRIED = re.compile(r"^\[(?:not|already) read: ", re.M)  # a page tried that was not read


def _path(url: str) -> str:
    return urlsplit(url).path.rstrip("/") or "/"


def reading(db: Path, site_url: str) -> list[tuple[str, int, int, int, int]]:
    """Per sub-question: (topic, index, readable pages read, readable pages offered, pages
    tried), from the offline engine's raw notes (every tool result of its transcript: the
    search listings, and one line per page tried)."""
    from core.store import query_readonly

    def readable(urls: list[str]) -> set[str]:
        return {_path(u) for u in urls if u.startswith(site_url) and _path(u) in READABLE}

    _, rows = query_readonly(db, "SELECT DISTINCT t.topic, f.subquestion_index, f.raw_notes "
                                 "FROM findings f JOIN topics t USING (topic_id) ORDER BY 1, 2")
    out = []
    for topic, index, notes in rows:
        read = _READ.findall(notes or "")
        out.append((topic, index, len(readable(read)), len(readable(_LISTED.findall(notes or ""))),
                    len(read) + len(_TRIED.findall(notes or ""))))
    return out


@contextmanager
def serving(site: Site) -> Iterator[dict[str, str]]:
    """The site on three loopback hosts and a SerpAPI stand-in listing its pages; yields the
    environment that points researchflow at them (only the three hosts allow-listed)."""
    from tests.fakes.http import Reply, ScriptedServer

    with ScriptedServer(default=site) as web, ScriptedServer(default=site) as traps, \
            ScriptedServer(default=site) as looping, ScriptedServer() as serp:
        port = int(web.url.rsplit(":", 1)[1])
        site.private_url = f"http://127.0.0.2:{port}"
        serp.default = Reply(200, {"search_metadata": {"status": "Success"},
                                   "organic_results": results(web.url, traps.url, looping.url,
                                                              port)})
        site.searches = serp.requests
        yield {"SERPAPI_API_KEY": "serp-bench-key", "RESEARCHFLOW_SERPAPI_BASE_URL": serp.url,
               "RESEARCHFLOW_FETCH_ALLOW_HOSTS": ",".join(
                   u.removeprefix("http://") for u in (web.url, traps.url, looping.url)),
               "RESEARCHFLOW_RESULTS_PER_QUERY": "14"}


def _fetcher():
    """The process's cached fetcher, from the search backend the runs built (for its counters)."""
    from tasks import contexts

    for context in contexts.built():
        serp = getattr(getattr(context.search, "_backend", None), "inner", None)
        fetch = getattr(serp, "_fetch", None)
        if fetch is not None and hasattr(fetch, "hits"):
            return fetch
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--max-pages", type=int, default=6)
    args = parser.parse_args(argv)
    from bench.workspace import workspace

    work = workspace("rf-bench-web-")  # before Prefect is imported
    from core.models import TopicOptions
    from core.store import query_readonly
    from flows.topic import research_topic

    site = Site()
    db = work / "web.duckdb"
    walls = []
    with serving(site) as env:
        os.environ.update(env)
        for topic in TOPICS:
            started = time.perf_counter()
            state = research_topic(topic=topic, batch_id="web", model="offline",
                                   search="serpapi", db_path=str(db),
                                   options=TopicOptions(max_pages=args.max_pages),
                                   return_state=True)
            walls.append(time.perf_counter() - started)
            print(f"  {topic}: {state.type.value} in {walls[-1]:.1f} s", file=sys.stderr,
                  flush=True)
        searches = len(site.searches)
        site_url = env["RESEARCHFLOW_FETCH_ALLOW_HOSTS"].split(",")[0]

    print(f"max pages {args.max_pages}, at most {2 * args.max_pages} pages tried per "
          "sub-question")
    print("| topic | sub-question | readable pages read / offered | pages tried |")
    print("|---|---|---|---|")
    for topic, index, read, offered, tried in reading(db, f"http://{site_url}"):
        print(f"| {topic[:40]} | {index} | {read} / {offered} | {tried} |")
    print()
    pages = [p for p in site.requests if p not in ("/robots.txt", "/loop2")]
    pages += [p for p in READABLE if p not in pages]  # a page never fetched: 0 requests
    print("| page | requests over both runs |")
    print("|---|---|")
    for path in sorted(pages):
        print(f"| {path} | {site.requests[path]} |")
    per_page = sum(site.requests[p] for p in READABLE) / len(READABLE)
    _, sources = query_readonly(db, "SELECT url, text FROM sources")
    private = [u for u, _ in sources if urlsplit(u).hostname in ("localhost", "127.0.0.2")]
    pdf_text = any(PDF_SENTENCE in (t or "") for u, t in sources if u.endswith(".pdf"))
    _, cited = query_readonly(db, "SELECT c.quote, s.text FROM citations c JOIN sources s "
                                  "USING (url, content_hash)")
    _, stored = query_readonly(db, "SELECT count(*), count(DISTINCT url) FROM sources")
    bloated = len(site.pages["/bloated"])
    print()
    print(f"fetches per distinct readable page (articles + PDF): {per_page:.2f}")
    print(f"requests to private stand-ins (/secret): {site.requests['/secret']}; "
          f"sources stored on private hosts: {len(private)}")
    print(f"hang requests: {site.requests['/hang']}; loop requests: "
          f"{site.requests['/loop'] + site.requests['/loop2']}; SerpAPI searches: {searches}")
    print(f"bytes the site sent: {sum(site.sent.values()):,} (bloated page {bloated:,} bytes "
          f"x {site.sent['/bloated'] // max(bloated, 1)} full sends)")
    print("stored: " + ", ".join(sorted(urlsplit(u).path + (f"?{urlsplit(u).query}" if urlsplit(u).query else "") for u, _ in sources)))
    print(f"sources stored: {stored[0][0]} ({stored[0][1]} distinct urls); PDF text stored: "
          f"{'yes' if pdf_text else 'no'}")
    print(f"citations: {len(cited)}, verbatim: {sum(1 for q, t in cited if q and q in (t or ''))}")
    fetcher = _fetcher()
    if fetcher is not None:
        wire = fetcher._fetch.stats.snapshot()
        print(f"fetcher: {fetcher.fetches} fetches, {fetcher.hits} served from the page cache; "
              f"{wire['bytes_downloaded']:,} bytes downloaded (caps stop a page at its declared "
              f"or streamed size); refusals: {wire['refusals']}")
    print(f"wall time: run 1 {walls[0]:.1f} s, run 2 {walls[1]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
