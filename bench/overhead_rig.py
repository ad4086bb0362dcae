"""The loopback world of bench/overhead.py, and what a configuration's process did besides its
calls (the same batch in plain threads is bench/overhead_plain.py).

`serving(latency, hosts=)` starts, on 127.0.0.1, each answering after a FIXED sleep:

- an OpenAI-compatible provider (the research provider of tests/fakes, every role) that sleeps
  `latency.llm` per call;
- a SerpAPI stand-in that sleeps `latency.search` per search and lists `RESULTS` pages for the
  query, spread over the sites by a hash of their path;
- `hosts` sites (one port each, so each is its own host to the fetcher's per-host limit) that
  sleep `latency.page` per request, robots.txt (404) included.

Every search query the fake provider writes ends with the topic's tag and a hash of its
sub-question (`… qa003 5f1c2e`), and every page URL carries both (`/qa003/5f1c2e/…`), so no two
sub-questions share a search or a page (no cache hit crosses them, whatever the schedule) and
each request can be put down to its topic and sub-question. `Recorder.requests` holds one
`Request(kind, role, tag, sq, host, start, end)` per request (times: time.monotonic(), which is
one clock for every process of the machine).

`instrument()` (bench only) wraps Prefect's HTTP clients and events worker to tally the API
requests a process makes (by route, with their statuses, time waited and retry back-off) and the
events it emits; `cpu()` and `tree_cpu(pid)` read CPU seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections import Counter, defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

RESULTS = 4  # results per search (Settings.results_per_query's default)
TAG = re.compile(r"\bq[a-z]\d{3}\b")  # a topic's tag: q, the configuration's letter, a number
SUBJECTS = ("memory use", "blocking calls", "waiting on sockets", "scheduling", "locks",
            "timers", "cancellation", "thread pools", "back-pressure", "timeouts")


@dataclass(frozen=True)
class Latency:
    llm: float = 0.300  # seconds per provider call
    search: float = 0.150  # per SerpAPI search
    page: float = 0.100  # per page request (robots.txt included)


@dataclass(frozen=True)
class Request:
    kind: str  # "llm" | "search" | "page" | "robots"
    role: str  # the LLM role; "" for the others
    tag: str  # the topic's tag ("" when the request names none: robots.txt)
    sq: str  # the sub-question's hash ("" for topic-level calls and robots.txt)
    host: int  # the site's number for pages and robots.txt, else -1
    start: float
    end: float


@dataclass
class Recorder:
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *args) -> None:
        with self.lock:
            self.requests.append(Request(*args))

    def since(self, mark: int) -> list[Request]:
        with self.lock:
            return list(self.requests[mark:])


def topic_text(letter: str, i: int) -> str:
    """A topic unique to one configuration (its tag ends it, so it survives in sub-questions)."""
    return f"Threading or asyncio for {SUBJECTS[i % len(SUBJECTS)]} in case {tag(letter, i)}"


def tag(letter: str, i: int) -> str:
    return f"q{letter}{i:03d}"


def sq_hash(question: str) -> str:
    return hashlib.sha1(" ".join(question.split()).encode()).hexdigest()[:6]


# -- the provider ------------------------------------------------------------------------------

class SlowProvider:
    """The research provider's answers after `delay` seconds, with searches named per
    sub-question (module docstring)."""

    def __init__(self, delay: float, recorder: Recorder) -> None:
        self.delay = delay
        self.recorder = recorder

    def __call__(self, rec):
        from tests.fakes import providers as fake
        from tests.fakes.research_provider import answer, last_user_text, role_of

        start = time.monotonic()
        body = rec.json() or {}
        role = role_of("openai", body)
        text = json.dumps(body.get("messages", []), ensure_ascii=False)
        found = TAG.search(text)
        topic = found.group(0) if found else ""
        asked = re.search(r"Sub-question: (.*)", last_user_text("openai", body))
        sq = sq_hash(asked.group(1)) if asked else ""
        reply = answer(role, "openai", body)
        reply = _named_queries(role, reply, topic, asked.group(1) if asked else "")
        time.sleep(max(0.0, self.delay - (time.monotonic() - start)))
        self.recorder.add("llm", role, topic, sq, -1, start, time.monotonic())
        return fake.success_reply("openai", reply, stream=bool(body.get("stream")),
                                  input_tokens=fake.estimate_tokens("openai", body),
                                  output_tokens=max(1, len(reply) // 3))


def _named_queries(role: str, reply: str, topic: str, question: str) -> str:
    """Every search query ends with the topic's tag and its sub-question's hash."""
    if role not in ("plan", "queries", "rewrite", "review"):
        return reply
    data = json.loads(reply)

    def named(queries: list[str], q: str) -> list[str]:
        return [f"{text} {topic} {sq_hash(q)}" for text in queries]

    if role == "plan":
        for sub in data["subquestions"]:
            sub["queries"] = named(sub["queries"], sub["question"])
    elif role == "review":
        for follow in data["followups"]:
            follow["queries"] = named(follow["queries"], follow["question"])
    else:
        data["queries"] = named(data.get("queries") or [], question)
    return json.dumps(data)


# -- search and sites --------------------------------------------------------------------------

class SlowSearch:
    def __init__(self, delay: float, recorder: Recorder, sites: list[str]) -> None:
        self.delay, self.recorder, self.sites = delay, recorder, sites

    def __call__(self, rec):
        from tests.fakes.http import Reply

        start = time.monotonic()
        query = (parse_qs(urlsplit(rec.path).query).get("q") or [""])[0]
        words = query.split()
        topic, sq = (words[-2], words[-1]) if len(words) >= 2 else ("", "")
        slug = hashlib.sha1(query.encode()).hexdigest()[:6]
        results = []
        for j in range(RESULTS):
            path = f"/{topic}/{sq}/{slug}/{j}"
            site = self.sites[int(hashlib.sha1(path.encode()).hexdigest(), 16) % len(self.sites)]
            results.append({"position": j + 1, "title": f"Waiting, part {j + 1}",
                            "link": site + path, "snippet": "threading asyncio waiting"})
        time.sleep(max(0.0, self.delay - (time.monotonic() - start)))
        self.recorder.add("search", "", topic, sq, -1, start, time.monotonic())
        return Reply(200, {"search_metadata": {"status": "Success"}, "organic_results": results})


def article(path: str) -> bytes:
    seed = int(hashlib.sha1(path.encode()).hexdigest()[:4], 16)
    body = "".join(f"<p>Example {i} shows that a threading or asyncio program waits on "
                   f"input or output for {seed % 97 + i * 7} milliseconds before it resumes.</p>"
                   for i in range(12))
    return (f"<html><head><title>Waiting {path}</title></head><body><nav>Home | Blog</nav>"
            f"<article><h1>Waiting on input and output</h1>{body}</article>"
            f"<footer>Copyright 2026</footer></body></html>").encode()


class SlowSite:
    def __init__(self, number: int, delay: float, recorder: Recorder) -> None:
        self.number, self.delay, self.recorder = number, delay, recorder

    def __call__(self, rec):
        from tests.fakes.http import Reply

        start = time.monotonic()
        path = urlsplit(rec.path).path
        robots = path == "/robots.txt"
        parts = path.strip("/").split("/")
        reply = Reply(404, b"", {"content-type": "text/plain"}) if robots else \
            Reply(200, article(path), {"content-type": "text/html; charset=utf-8"})
        time.sleep(max(0.0, self.delay - (time.monotonic() - start)))
        self.recorder.add("robots" if robots else "page", "", "" if robots else parts[0],
                          "" if robots or len(parts) < 2 else parts[1], self.number, start,
                          time.monotonic())
        return reply


@contextmanager
def serving(latency: Latency, hosts: int) -> Iterator[tuple[dict[str, str], Recorder]]:
    """The loopback world; yields the environment that points researchflow (the real openai SDK
    and serpapi client) at it, and the recorder."""
    from tests.fakes.http import ScriptedServer

    recorder = Recorder()
    with ExitStack() as stack:
        sites = [stack.enter_context(ScriptedServer(SlowSite(n, latency.page, recorder)))
                 for n in range(hosts)]
        urls = [s.url for s in sites]
        llm = stack.enter_context(ScriptedServer(SlowProvider(latency.llm, recorder)))
        serp = stack.enter_context(ScriptedServer(SlowSearch(latency.search, recorder, urls)))
        yield {"OPENAI_API_KEY": "sk-bench-not-a-real-key", "OPENAI_BASE_URL": llm.url + "/v1",
               "SERPAPI_API_KEY": "serp-bench-key", "RESEARCHFLOW_SERPAPI_BASE_URL": serp.url,
               "RESEARCHFLOW_FETCH_ALLOW_HOSTS": ",".join(u.removeprefix("http://")
                                                          for u in urls),
               "RESEARCHFLOW_RESULTS_PER_QUERY": str(RESULTS)}, recorder


# -- what a configuration's process did, besides its calls -----------------------------------

class ApiTally:
    """What this process asked of the Prefect API, by route (ids masked): requests, seconds
    waited for them, answers by status, seconds slept in the client's retry back-off; and
    the events it emitted, by name."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.routes: dict[str, list] = defaultdict(lambda: [0, 0.0, Counter(), 0.0])
        self.events: Counter = Counter()
        self.retried: list[tuple[float, float, str]] = []  # (started, seconds, route)
        self.on = False

    def add(self, route: str, seconds: float, status: int | str, slept: float = 0.0,
            started: float = 0.0) -> None:
        if self.on:
            with self.lock:
                row = self.routes[route]
                row[0] += 1
                row[1] += seconds
                row[2][str(status)] += 1
                row[3] += slept
                if slept:
                    self.retried.append((started, seconds, route))

    def snapshot(self) -> dict:
        with self.lock:
            return {"routes": {k: [v[0], v[1], dict(v[2]), v[3]] for k, v in self.routes.items()},
                    "events": dict(self.events), "retried": sorted(self.retried)}


def instrument() -> ApiTally:
    """Count the API traffic of this process (bench only: wraps Prefect's client methods)."""
    import re

    from prefect.client.base import PrefectHttpxAsyncClient, PrefectHttpxSyncClient
    from prefect.events.worker import EventsWorker

    tally = ApiTally()
    ids = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

    def route(request) -> str:
        return f"{request.method} {ids.sub('{id}', request.url.path.split('/api', 1)[-1])}"

    sync_send = PrefectHttpxSyncClient._send_with_retry

    def settle(request, started: float, statuses: list) -> None:
        # One request as the client saw it, retries included; each retried answer on its own.
        spent = time.monotonic() - started
        tally.add(route(request), spent, statuses[-1] if statuses else "error",
                  slept=spent if len(statuses) > 1 else 0.0, started=started)
        for status in statuses[:-1]:
            tally.add(route(request) + " (retried)", 0.0, status)

    def sync_retrying(self, request, send, *args, **kwargs):
        started = time.monotonic()
        statuses = []

        def counted(req, *a, **k):
            response = send(req, *a, **k)
            statuses.append(response.status_code)
            return response

        try:
            return sync_send(self, request, counted, *args, **kwargs)
        finally:
            settle(request, started, statuses)

    async_send = PrefectHttpxAsyncClient._send_with_retry

    async def async_retrying(self, request, send, *args, **kwargs):
        started = time.monotonic()
        statuses = []

        async def counted(req, *a, **k):
            response = await send(req, *a, **k)
            statuses.append(response.status_code)
            return response

        try:
            return await async_send(self, request, counted, *args, **kwargs)
        finally:
            settle(request, started, statuses)

    handle = EventsWorker._handle

    async def handling(self, event, *args, **kwargs):
        if tally.on:
            with tally.lock:
                tally.events[event.event] += 1
        return await handle(self, event, *args, **kwargs)

    PrefectHttpxSyncClient._send_with_retry = sync_retrying
    PrefectHttpxAsyncClient._send_with_retry = async_retrying
    EventsWorker._handle = handling
    return tally


def cpu() -> float:
    """CPU seconds (user + system) of this process so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants (Linux /proc), for the Prefect server."""
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return total
