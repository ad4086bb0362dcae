"""core.accounting.metering around the real backends: the openai, anthropic and google-genai SDKs
(built by `make_model`) talk to a loopback `ScriptedServer`; the ledger writes to a real DuckDB
file.

Each call leaves one `ledger` row with its scope, role, the provider's own token counts (or
estimates, marked so) and its price; failures are recorded and re-raised untouched; a rate limit
pauses the provider's gate; a budget stops a call before any request; no key reaches the file.
`MeteredSearch` prices each search per call and never records reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from core.accounting.ledger import Ledger, acting_as, scoped
from core.llm.base import ChatModel
from core.llm.registry import make_model
from core.accounting.metering import MeteredModel
from core.search.metered import MeteredSearch
from core.models import Message, SearchResult, Source
from core.accounting.pacing import ProviderGate
from core.accounting.prices import PriceTable
from core.settings import Settings
from core.signals import BudgetExceeded, RateLimited, Transient
from core.store import ResultStore
from core.overflow.tokens import TokenEstimator
from core.store.connection import release_all
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer
from tests.fakes.clock import FakeTime

API_KEY = "sk-metering-test-0123456789abcdef"
PROMPT = [Message(role="system", content="Be brief."),
          Message(role="user", content="What does the GIL protect?")]
SCOPE = dict(run_id="run-m", batch_id="batch-m", topic_id="topic-m", subquestion_index=2)


@dataclass(frozen=True)
class Backend:
    spec: str
    wire: fake.Provider
    url_suffix: str = ""

    @property
    def model(self) -> str:
        return self.spec.partition(":")[2]

    def make(self, url: str) -> ChatModel:
        base = url + self.url_suffix
        settings = Settings(_env_file=None, request_timeout=10, openai_api_key=API_KEY,
                            anthropic_api_key=API_KEY, gemini_api_key=API_KEY,
                            openai_base_url=base, anthropic_base_url=base, gemini_base_url=base)
        return make_model(self.spec, settings)


BACKENDS = [Backend("openai:gpt-4o-mini", "openai", "/v1"),
            Backend("anthropic:claude-sonnet-4-5", "anthropic"),
            Backend("gemini:gemini-2.5-flash", "gemini")]


@dataclass
class Rig:
    path: Path
    ledger: Ledger
    prices: PriceTable
    gate: ProviderGate
    time: FakeTime

    def rows(self) -> list[dict[str, Any]]:
        release_all()  # a read-only opener must wait for this process's held connection
        with duckdb.connect(str(self.path), read_only=True) as con:
            cur = con.execute("SELECT * FROM ledger ORDER BY created_at")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

    def file_bytes(self) -> bytes:
        return b"".join(p.read_bytes() for p in self.path.parent.iterdir() if p.is_file())


@pytest.fixture(params=BACKENDS, ids=lambda b: b.wire)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    path = tmp_path / "store" / "researchflow.duckdb"
    time = FakeTime()
    return Rig(path, Ledger(ResultStore(path)), PriceTable(),
               ProviderGate(clock=time.clock, sleep=time.sleep), time)


def metered(backend: Backend, server: ScriptedServer, rig: Rig) -> MeteredModel:
    return MeteredModel(backend.make(server.url), rig.ledger, rig.prices, rig.gate,
                        estimator=TokenEstimator())


def condense(model: MeteredModel, **scope: Any):
    with scoped(**(SCOPE | scope)), acting_as("condense"):
        return model.complete(PROMPT, max_tokens=50)


# --- success ----------------------------------------------------------------------------------

def test_a_success_is_one_row_with_the_reported_tokens_and_their_price(
        backend: Backend, server: ScriptedServer, rig: Rig) -> None:
    server.push(fake.success_reply(backend.wire, "The GIL protects interpreter state.",
                                   input_tokens=1_200, output_tokens=350,
                                   cached_input_tokens=800, reasoning_tokens=200))
    model = metered(backend, server, rig)

    out = condense(model)

    assert out.text == "The GIL protects interpreter state."
    assert model.provider == backend.wire and model.model == backend.model
    [row] = rig.rows()
    assert {k: row[k] for k in ("run_id", "batch_id", "topic_id", "subquestion_index", "role",
                                "provider", "model", "outcome", "error")} == {
        **SCOPE, "role": "condense", "provider": backend.wire, "model": backend.model,
        "outcome": "ok", "error": None}
    assert (row["input_tokens"], row["cached_input_tokens"], row["output_tokens"],
            row["reasoning_tokens"]) == (1_200, 800, 350, 200)
    assert row["tokens_estimated"] is False
    expected = PriceTable().cost(backend.model, input_tokens=1_200, cached_input_tokens=800,
                                 output_tokens=350)
    assert expected is not None and expected > 0
    assert row["cost_usd"] == pytest.approx(expected)
    assert row["latency_ms"] > 0
    assert rig.ledger.spent("run-m", "topic-m") == pytest.approx(expected)
    assert ResultStore(rig.path).spent_usd(run_id="run-m") == pytest.approx(expected)


def test_a_reply_without_usage_is_estimated_and_marked(backend: Backend, server: ScriptedServer,
                                                       rig: Rig) -> None:
    if backend.wire == "openai":
        body = fake.openai_completion("ok, estimated")
        del body["usage"]
    elif backend.wire == "anthropic":
        body = fake.anthropic_message("ok, estimated")
        del body["usage"]
    else:
        body = fake.gemini_response("ok, estimated")
        del body["usageMetadata"]
    server.push(Reply(body=body))

    condense(metered(backend, server, rig))

    [row] = rig.rows()
    estimator = TokenEstimator()
    assert row["tokens_estimated"] is True and row["outcome"] == "ok"
    assert row["input_tokens"] == estimator.estimate(PROMPT, model=backend.model) > 0
    assert row["output_tokens"] == estimator.estimate("ok, estimated", model=backend.model) > 0
    assert row["cost_usd"] == pytest.approx(PriceTable().cost(
        backend.model, input_tokens=row["input_tokens"], output_tokens=row["output_tokens"]))


def test_a_success_resets_the_blind_pause(backend: Backend, server: ScriptedServer,
                                          rig: Rig) -> None:
    rig.gate.rate_limited(None)
    rig.gate.rate_limited(None)  # the next blind pause would be 4 s
    server.push(fake.success_reply(backend.wire, "ok"))

    condense(metered(backend, server, rig))

    assert rig.time.sleeps == [pytest.approx(2.0)]  # the call waited for the pause first
    assert rig.gate.rate_limited(None) == 1.0


# --- failures ---------------------------------------------------------------------------------

def test_a_rate_limit_is_recorded_reraised_and_pauses_the_gate(
        backend: Backend, server: ScriptedServer, rig: Rig) -> None:
    server.push(fake.rate_limit_error(backend.wire, retry_after=7))

    with pytest.raises(RateLimited) as info:
        condense(metered(backend, server, rig))

    exc = info.value
    assert type(exc) is RateLimited
    assert exc.provider == backend.wire and exc.retry_after == 7.0
    [row] = rig.rows()
    assert row["outcome"] == "RateLimited" and row["cost_usd"] == 0.0
    assert row["role"] == "condense" and row["topic_id"] == "topic-m"
    assert row["error"] and API_KEY not in row["error"]
    assert row["input_tokens"] is None and row["tokens_estimated"] is False
    assert rig.gate._paused_until == pytest.approx(rig.time.clock() + 7.0)
    assert rig.gate.wait() == pytest.approx(7.0)
    assert rig.ledger.spent("run-m", "topic-m") == 0.0


def test_a_server_error_is_recorded_with_its_text_and_no_key(
        backend: Backend, server: ScriptedServer, rig: Rig) -> None:
    # A server that echoes the key in its error: the row must carry the text, masked.
    body = fake.error_body(backend.wire, 500, f"backend exploded (marker-5xx) for key {API_KEY}",
                           type="api_error" if backend.wire == "anthropic" else None)
    server.push(Reply(500, body))

    with pytest.raises(Transient) as info:
        condense(metered(backend, server, rig))

    assert type(info.value) is Transient and info.value.status == 500
    [row] = rig.rows()
    assert row["outcome"] == "Transient" and row["cost_usd"] == 0.0
    assert "marker-5xx" in row["error"] and API_KEY not in row["error"]
    assert "0123456789abcdef" not in row["error"]
    assert rig.gate._paused_until <= rig.time.clock()  # not a rate limit: nobody waits
    assert rig.gate.wait() == 0.0


def test_the_key_never_reaches_the_duckdb_file(backend: Backend, server: ScriptedServer,
                                               rig: Rig) -> None:
    server.push(fake.success_reply(backend.wire, "ok", input_tokens=20, output_tokens=5),
                fake.rate_limit_error(backend.wire, retry_after=1),
                Reply(500, fake.error_body(backend.wire, 500,
                                           f"echo marker-in-file {API_KEY}")))
    model = metered(backend, server, rig)

    condense(model)
    for signal in (RateLimited, Transient):
        with pytest.raises(signal):
            condense(model)

    assert len(rig.rows()) == 3
    data = rig.file_bytes()
    assert b"marker-in-file" in data  # the error text is stored where we look ...
    assert API_KEY.encode() not in data  # ... and the key is not
    assert b"0123456789abcdef" not in data
    # and the key did go over the wire, so the absence above means something
    sent = [r.headers for r in server.requests]
    assert all(API_KEY in " ".join(h.values()) for h in sent)


# --- budgets ----------------------------------------------------------------------------------

def test_a_tiny_budget_stops_the_call_before_any_request(backend: Backend,
                                                         server: ScriptedServer,
                                                         rig: Rig) -> None:
    server.push(fake.success_reply(backend.wire, "never sent"))

    with pytest.raises(BudgetExceeded) as info:
        condense(metered(backend, server, rig), max_topic_cost_usd=1e-7)

    assert server.requests == []
    assert info.value.scope == "topic" and info.value.limit == 1e-7
    assert info.value.projected > 1e-7
    assert rig.rows() == []
    assert rig.time.sleeps == []


def test_a_large_enough_budget_lets_the_call_through(backend: Backend, server: ScriptedServer,
                                                     rig: Rig) -> None:
    server.push(fake.success_reply(backend.wire, "ok", input_tokens=20, output_tokens=5))

    out = condense(metered(backend, server, rig), max_topic_cost_usd=1.0,
                   max_batch_cost_usd=1.0)

    assert out.text == "ok" and len(server.requests) == 1
    assert [r["outcome"] for r in rig.rows()] == ["ok"]


def test_the_budget_counts_what_was_already_spent(server: ScriptedServer, rig: Rig) -> None:
    backend = BACKENDS[0]
    server.push(fake.success_reply("openai", "first", input_tokens=1_000, output_tokens=10),
                fake.success_reply("openai", "second"))
    model = metered(backend, server, rig)
    first_cost = PriceTable().cost("gpt-4o-mini", input_tokens=1_000, output_tokens=10)
    # room for the first call's projection (its input estimate and a 50-token output cap),
    # but not for a second one on top of what the first really cost
    cap = first_cost + 20 * 0.60 / 1_000_000

    condense(model, max_topic_cost_usd=cap)
    with pytest.raises(BudgetExceeded) as info:
        condense(model, max_topic_cost_usd=cap)

    assert len(server.requests) == 1
    assert info.value.spent == pytest.approx(first_cost)
    assert len(rig.rows()) == 1


# --- search -----------------------------------------------------------------------------------

class MemorySearch:
    """A small in-memory SearchBackend; `fail` makes the next search raise that signal."""

    name = "memory"

    def __init__(self) -> None:
        self.searches: list[str] = []
        self.reads: list[str] = []
        self.fail: Exception | None = None

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        self.searches.append(query)
        if self.fail is not None:
            raise self.fail
        return [SearchResult(url=f"https://example.org/{query}/{i}", title=f"{query} {i}",
                             rank=i) for i in range(k)]

    def read(self, result: SearchResult) -> Source | None:
        self.reads.append(result.url)
        return Source(url=result.url, title=result.title, text=f"text of {result.title}")


def test_each_search_is_one_row_priced_per_call_and_reads_are_free(rig: Rig) -> None:
    inner = MemorySearch()
    search = MeteredSearch(inner, rig.ledger, rig.prices, rig.gate)
    per_call = PriceTable().lookup("serpapi").per_call

    with scoped(**SCOPE), acting_as("condense"):
        hits = search.search("gil", k=3)
        search.search("asyncio", k=2)
        pages = [search.read(hit) for hit in hits]

    assert [h.url for h in hits] == [f"https://example.org/gil/{i}" for i in range(3)]
    assert pages[0].text == "text of gil 0" and len(inner.reads) == 3
    assert search.name == "memory" and search.provider == "serpapi"
    rows = rig.rows()
    assert len(rows) == 2  # two searches; the three reads left no row
    for row in rows:
        assert (row["role"], row["provider"], row["model"], row["outcome"]) == \
            ("search", "serpapi", "serpapi", "ok")
        assert (row["run_id"], row["topic_id"], row["subquestion_index"]) == \
            ("run-m", "topic-m", 2)
        assert row["cost_usd"] == pytest.approx(per_call)
    assert rig.ledger.spent("run-m", "topic-m") == pytest.approx(2 * per_call)


def test_a_search_budget_stops_the_search_before_it_runs(rig: Rig) -> None:
    inner = MemorySearch()
    search = MeteredSearch(inner, rig.ledger, rig.prices, rig.gate)
    per_call = PriceTable().lookup("serpapi").per_call

    with scoped(**SCOPE, max_topic_cost_usd=1.5 * per_call):
        search.search("first")
        with pytest.raises(BudgetExceeded):
            search.search("second")

    assert inner.searches == ["first"]
    assert len(rig.rows()) == 1


def test_a_rate_limited_search_is_recorded_and_pauses_its_gate(rig: Rig) -> None:
    inner = MemorySearch()
    inner.fail = RateLimited("serpapi HTTP 429: too many searches", provider="serpapi",
                             status=429, retry_after=3.0)
    search = MeteredSearch(inner, rig.ledger, rig.prices, rig.gate)

    with scoped(**SCOPE), pytest.raises(RateLimited) as info:
        search.search("gil")

    assert info.value is inner.fail
    [row] = rig.rows()
    assert (row["role"], row["outcome"], row["cost_usd"]) == ("search", "RateLimited", 0.0)
    assert rig.gate.wait() == pytest.approx(3.0)
