"""HostPolicy (per-host slots, failure memory) and RobotsCache against a loopback server."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from core.search.hosts import HostPolicy, RobotsCache, SlotTimeout, host_key, origin_of
from tests.fakes.http import Recorded, Reply, ScriptedServer

UA = "researchflow/0.1 (+https://github.com/researchflow/researchflow; research bot)"


def test_host_key_and_origin() -> None:
    assert host_key("https://Example.COM/a?b") == "example.com"
    assert host_key("http://example.com:80/") == "example.com"
    assert host_key("https://example.com:8443/") == "example.com:8443"
    assert host_key("http://[::1]:8080/") == "[::1]:8080"
    assert origin_of("HTTP://Example.com:8080/x/y") == "http://example.com:8080"
    assert origin_of("https://example.com:443/x") == "https://example.com"


def test_slots_limit_concurrency_per_host_only() -> None:
    hosts = HostPolicy(2)
    active: dict[str, int] = {"a": 0, "b": 0}
    peak: dict[str, int] = {"a": 0, "b": 0}
    lock = threading.Lock()

    def work(host: str) -> None:
        with hosts.slot(host):
            with lock:
                active[host] += 1
                peak[host] = max(peak[host], active[host])
            time.sleep(0.05)
            with lock:
                active[host] -= 1

    threads = [threading.Thread(target=work, args=(h,)) for h in "aaaaaabbbbbb"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == {"a": 2, "b": 2}


def test_slot_wait_can_time_out_and_is_released_on_error() -> None:
    hosts = HostPolicy(1)
    with hosts.slot("h"):
        with pytest.raises(SlotTimeout):
            with hosts.slot("h", timeout=0.05):
                pass
    with pytest.raises(RuntimeError):
        with hosts.slot("h"):
            raise RuntimeError("boom")
    with hosts.slot("h", timeout=0):  # released despite the error
        pass


def test_a_failed_host_is_forgotten_after_an_hour() -> None:
    now = [1_000.0]
    hosts = HostPolicy(2, clock=lambda: now[0])
    hosts.mark_failed("slow.example", "timed out")
    now[0] += 3_599
    assert hosts.failure("slow.example") == "timed out"
    now[0] += 2
    assert hosts.failure("slow.example") is None and hosts.failed_hosts() == {}


def test_failure_memory_keeps_the_first_reason() -> None:
    hosts = HostPolicy(2)
    assert hosts.failure("h") is None
    hosts.mark_failed("h", "timed out")
    hosts.mark_failed("h", "redirect loop")
    assert hosts.failure("h") == "timed out" and hosts.failure("other") is None
    assert hosts.failed_hosts() == {"h": "timed out"}
    with pytest.raises(ValueError):
        HostPolicy(0)


# ---- robots.txt ------------------------------------------------------------------------------

@pytest.fixture()
def client():
    with httpx.Client() as c:
        yield c


def robots_site(robots: Reply | None):
    def handler(rec: Recorded) -> Reply:
        if rec.path == "/robots.txt" and robots is not None:
            return robots
        return Reply(404, "nope")
    return handler


def test_robots_rules_are_fetched_once_and_applied(client: httpx.Client) -> None:
    rules = "User-agent: *\nDisallow: /private\n\nUser-agent: otherbot\nDisallow: /\n"
    with ScriptedServer(default=robots_site(Reply(200, rules))) as srv:
        robots = RobotsCache(client, user_agent=UA)
        assert not robots.allowed(srv.url + "/private/x")
        assert robots.allowed(srv.url + "/public")
        assert robots.allowed(srv.url + "/")
        assert not robots.allowed(srv.url + "/", "otherbot/2.0")
        assert [r.path for r in srv.requests] == ["/robots.txt"]
        assert srv.requests[0].headers["user-agent"] == UA


def test_robots_group_for_our_bot_wins(client: httpx.Client) -> None:
    rules = "User-agent: researchflow\nDisallow: /drafts\n\nUser-agent: *\nDisallow: /\n"
    with ScriptedServer(default=robots_site(Reply(200, rules))) as srv:
        robots = RobotsCache(client, user_agent=UA)
        assert robots.allowed(srv.url + "/post") and not robots.allowed(srv.url + "/drafts/1")


def test_concurrent_callers_share_one_robots_request(client: httpx.Client) -> None:
    def slow(rec: Recorded) -> Reply:
        time.sleep(0.2)
        return Reply(200, "User-agent: *\nDisallow: /private\n")

    with ScriptedServer(default=slow) as srv:
        robots = RobotsCache(client, user_agent=UA)
        answers: list[bool] = []
        threads = [threading.Thread(target=lambda: answers.append(
            robots.allowed(srv.url + "/private/a"))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [False] * 8 and len(srv.requests) == 1


@pytest.mark.parametrize("reply,note", [(None, "missing"), (Reply(403, "no"), "HTTP 403"),
                                        (Reply(503, "down"), "HTTP 503")])
def test_missing_or_failing_robots_allows_everything_and_is_remembered(
        client: httpx.Client, reply: Reply | None, note: str) -> None:
    with ScriptedServer(default=robots_site(reply)) as srv:
        robots = RobotsCache(client, user_agent=UA)
        assert robots.allowed(srv.url + "/private/x") and robots.allowed(srv.url + "/y")
        assert len(srv.requests) == 1
        assert robots.rules(srv.url + "/").note == note


def test_robots_timeout_allows_and_is_remembered(client: httpx.Client) -> None:
    def hang(rec: Recorded) -> Reply:
        time.sleep(2)
        return Reply(200, "User-agent: *\nDisallow: /\n")

    with ScriptedServer(default=hang) as srv:
        robots = RobotsCache(client, user_agent=UA, read_timeout=0.3)
        began = time.monotonic()
        assert robots.allowed(srv.url + "/x")
        assert time.monotonic() - began < 1.5
        assert robots.allowed(srv.url + "/z") and len(srv.requests) == 1
        assert robots.rules(srv.url + "/").note == "timed out"


def test_robots_request_respects_the_callers_deadline(client: httpx.Client) -> None:
    def hang(rec: Recorded) -> Reply:
        time.sleep(2)
        return Reply(200, "")

    with ScriptedServer(default=hang) as srv:
        robots = RobotsCache(client, user_agent=UA)  # 5 s read timeout of its own
        began = time.monotonic()
        assert robots.allowed(srv.url + "/x", until=time.monotonic() + 0.3)
        assert time.monotonic() - began < 1.5


def test_huge_robots_is_cut_at_the_cap(client: httpx.Client) -> None:
    rules = "User-agent: *\nDisallow: /private\n" + "# filler comment line\n" * 40_000 + \
        "Disallow: /late\n"
    with ScriptedServer(default=robots_site(Reply(200, rules))) as srv:
        robots = RobotsCache(client, user_agent=UA, max_bytes=100_000)
        assert not robots.allowed(srv.url + "/private/a")
        assert robots.allowed(srv.url + "/late")  # past the cap: never read
        assert robots.rules(srv.url + "/").note == "cut"


def test_robots_redirect_is_followed_and_checked(client: httpx.Client) -> None:
    with ScriptedServer() as srv:
        srv.push(Reply(301, b"", {"location": "/real-robots.txt"}),
                 Reply(200, "User-agent: *\nDisallow: /private\n"))
        checked: list[str] = []
        robots = RobotsCache(client, user_agent=UA, check=checked.append)
        assert not robots.allowed(srv.url + "/private")
        assert checked == [srv.url + "/robots.txt", srv.url + "/real-robots.txt"]


def test_robots_refused_by_the_check_means_no_request(client: httpx.Client) -> None:
    def refuse(url: str) -> None:
        raise ValueError("unsafe")

    with ScriptedServer(default=robots_site(Reply(200, "User-agent: *\nDisallow: /\n"))) as srv:
        robots = RobotsCache(client, user_agent=UA, check=refuse)
        assert robots.allowed(srv.url + "/x") and srv.requests == []
        assert robots.rules(srv.url + "/").note == "unsafe address"


def test_robots_are_per_origin(client: httpx.Client) -> None:
    with ScriptedServer(default=robots_site(Reply(200, "User-agent: *\nDisallow: /\n"))) as a, \
            ScriptedServer(default=robots_site(None)) as b:
        seen: list[tuple[str, int]] = []
        robots = RobotsCache(client, user_agent=UA, on_response=lambda h, n: seen.append((h, n)))
        assert not robots.allowed(a.url + "/x") and robots.allowed(b.url + "/x")
        assert [h for h, _ in seen] == [host_key(a.url), host_key(b.url)]
        assert set(robots.cached()) == {origin_of(a.url), origin_of(b.url)}
