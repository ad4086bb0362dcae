"""The call memo (core.accounting.memo) around the real openai SDK against a loopback server, stored
in a real DuckDB file: a repeated request is served its recorded answer without a request, in this
process and in the next (a fresh memo on the same store), and the ledger says so at $0; a new
edition is served an LLM call's answer but asks a search again; a refreshing run, an expired record,
a different parameter or a failed call pays. Neither the key nor the request reaches the memo's
table."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from core import secrets
from core.accounting.ledger import Ledger, acting_as, scoped
from core.llm.registry import make_model
from core.accounting.memo import CallMemo
from core.accounting.metering import MeteredModel
from core.search.metered import MeteredSearch
from core.models import Message, SearchResult
from core.accounting.pacing import ProviderGate
from core.accounting.prices import PriceTable
from core.settings import Settings
from core.signals import Fatal
from core.store import ResultStore
from core.store.call_memo import MemoStore
from core.store.connection import live_path, release_all
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer

API_KEY = "sk-memo-test-0123456789abcdefghij"
PROMPT = [Message(role="system", content="Be brief."),
          Message(role="user", content="What does the GIL protect? (private question 7731)")]
SCOPE = dict(run_id="run-memo", batch_id="b", topic_id="t", edition="2026-12-04")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


def model_on(server: ScriptedServer, db: Path, *, ttl_hours: float = 24.0, salt: str = "",
             batch_seconds: float = 0, **settings) -> tuple[MeteredModel, CallMemo, ResultStore]:
    store = ResultStore(db)
    memo = CallMemo(MemoStore(db), ttl_hours=ttl_hours, salt=salt, batch_seconds=batch_seconds)
    inner = make_model("openai:gpt-4o-mini", Settings(
        _env_file=None, openai_api_key=API_KEY, openai_base_url=server.url + "/v1",
        request_timeout=10, **settings))
    return MeteredModel(inner, Ledger(store), PriceTable(), ProviderGate(), memo=memo), memo, store


def ask(model: MeteredModel, **scope) -> str:
    with scoped(**(SCOPE | scope)), acting_as("condense"):
        return model.complete(PROMPT, max_tokens=50).text


def answering(text: str = "It protects the interpreter's state."):
    return lambda rec: fake.success_reply("openai", text, input_tokens=900, output_tokens=40)


def test_a_repeat_is_served_without_a_request_and_recorded_as_served_at_no_cost(db) -> None:
    with ScriptedServer(default=answering()) as server:
        model, memo, store = model_on(server, db)
        first, second = ask(model), ask(model)
        assert len(server.requests) == 1
        # A fresh process: a new memo on the same store is served from the table.
        again, _, _ = model_on(server, db)
        assert ask(again, run_id="run-rerun") == first == second
        assert len(server.requests) == 1
    model.meter.ledger.flush()
    again.meter.ledger.flush()
    paid = store.usage(run_id="run-memo")
    assert (paid.calls, paid.served_calls, paid.failed_calls) == (2, 1, 0)
    assert paid.cost_usd == pytest.approx(PriceTable().cost("gpt-4o-mini", input_tokens=900,
                                                            output_tokens=40))
    rerun = store.usage(run_id="run-rerun")
    assert (rerun.calls, rerun.served_calls, rerun.cost_usd) == (1, 1, 0.0)
    assert "1 served from the memo" in rerun.line()


def test_a_new_edition_is_served_an_unchanged_llm_request(db) -> None:
    # An LLM call observes nothing: tomorrow's edition sending the same bytes (an unchanged page
    # condensed for an unchanged sub-question) pays nothing, in a fresh process too.
    with ScriptedServer(default=answering()) as server:
        model, _, _ = model_on(server, db)
        first = ask(model)
        tomorrow, _, _ = model_on(server, db)
        assert ask(tomorrow, edition="2026-12-05", run_id="run-next") == first
        assert len(server.requests) == 1
    tomorrow.meter.ledger.flush()
    served = ResultStore(db).usage(run_id="run-next")
    assert (served.calls, served.served_calls, served.cost_usd) == (1, 1, 0.0)


def test_a_refresh_an_expiry_or_another_parameter_pays_again(db) -> None:
    with ScriptedServer(default=answering()) as server:
        model, _, _ = model_on(server, db)
        ask(model)
        assert len(server.requests) == 1
        fresh, _, _ = model_on(server, db, salt="refresh-run")
        ask(fresh)
        ask(fresh)  # the refreshing run's own repeat (its retry) is served
        assert len(server.requests) == 2
        expired, _, _ = model_on(server, db, ttl_hours=0)
        ask(expired)
        assert len(server.requests) == 3
        effort, _, _ = model_on(server, db, reasoning_effort="high")
        ask(effort)
        assert len(server.requests) == 4
        with scoped(**SCOPE), acting_as("condense"):  # another output cap is another request
            model.complete(PROMPT, max_tokens=51)
        assert len(server.requests) == 5
        # What the refreshing run asked is the newest answer for the next ordinary run.
        after, _, _ = model_on(server, db)
        ask(after)
        assert len(server.requests) == 5


def _age_records(db: Path, age: timedelta) -> None:
    release_all()
    with duckdb.connect(str(live_path(db))) as con:  # the file researchflow reads
        con.execute("UPDATE call_memo SET created_at = ?", [datetime.now(timezone.utc) - age])


def test_an_llm_answer_lasts_as_long_as_the_thinking_caches_and_no_longer(db) -> None:
    with ScriptedServer(default=answering()) as server:
        model, _, _ = model_on(server, db, ttl_hours=1)
        ask(model)
        # Past the TTL, within 8 days (next week's edition): still served.
        _age_records(db, timedelta(days=7))
        week, _, _ = model_on(server, db, ttl_hours=1)
        ask(week, edition="2026-12-11")
        assert len(server.requests) == 1
        _age_records(db, timedelta(days=9))
        later, _, _ = model_on(server, db, ttl_hours=1)
        ask(later, edition="2026-12-13")
        assert len(server.requests) == 2
        # A TTL longer than 8 days is the LLM answers' too.
        _age_records(db, timedelta(days=9))
        longer, _, _ = model_on(server, db, ttl_hours=24 * 10)
        ask(longer, edition="2026-12-13")
        assert len(server.requests) == 2


def test_a_failed_call_is_never_recorded(db) -> None:
    refusal = Reply(400, fake.error_body("openai", 400, "rejected by our safety system",
                                         code="content_policy_violation"))
    with ScriptedServer() as server:
        server.push(refusal)
        server.default = answering()
        model, _, _ = model_on(server, db)
        with pytest.raises(Fatal):
            ask(model)
        assert ask(model) == "It protects the interpreter's state."
        assert len(server.requests) == 2


def test_neither_the_key_nor_the_request_reaches_the_memo(db) -> None:
    secrets.remember(API_KEY)
    leaked = f"the key is {API_KEY}"
    with ScriptedServer(default=answering(leaked)) as server:
        model, _, _ = model_on(server, db)
        ask(model)
    release_all()
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT * FROM call_memo").fetchall()
    assert len(rows) == 1
    text = repr(rows)
    assert API_KEY not in text and "private question 7731" not in text
    assert "Be brief" not in text


class _Search:
    name = "serpapi"
    params = {"engine": "google"}

    def __init__(self) -> None:
        self.calls = 0

    def search(self, query: str, k: int = 5) -> list[SearchResult]:
        self.calls += 1
        return [SearchResult(url="https://example.org/a", title=f"About {query}", rank=1)]

    def read(self, result):
        return None


def test_a_repeated_search_is_served_in_its_edition_and_asked_again_in_the_next(db) -> None:
    store = ResultStore(db)
    inner = _Search()
    search = MeteredSearch(inner, Ledger(store), PriceTable(), ProviderGate(),
                           memo=CallMemo(MemoStore(db), ttl_hours=24, batch_seconds=0))
    with scoped(**SCOPE), acting_as("search"):
        first = search.search("gil", k=3)
        assert search.search("gil", k=3) == first and inner.calls == 1
        search.search("gil", k=4)
        assert inner.calls == 2
    with scoped(**(SCOPE | {"edition": "2026-12-05"})), acting_as("search"):
        search.search("gil", k=3)
    assert inner.calls == 3


def test_a_search_older_than_the_expiry_is_not_served(db) -> None:
    store = ResultStore(db)
    inner = _Search()

    def search() -> None:
        metered = MeteredSearch(inner, Ledger(store), PriceTable(), ProviderGate(),
                                memo=CallMemo(MemoStore(db), ttl_hours=1, batch_seconds=0))
        with scoped(**SCOPE), acting_as("search"):
            metered.search("gil", k=3)

    search()
    search()
    assert inner.calls == 1  # a fresh memo, served from the store
    _age_records(db, timedelta(hours=2))
    search()
    assert inner.calls == 2


def test_a_worker_is_served_what_another_recorded_after_it_first_looked(db) -> None:
    """Two long-lived workers of one store (Dask workers, a served deployment's process): the
    rerun of a topic may land on the worker that did not make its calls, after that worker
    had already looked at the store for calls of its own. It must still be served."""
    question = [Message(role="user", content="What does the GIL protect? (asked by worker B)")]
    with ScriptedServer(default=answering()) as server:
        worker_a, _, _ = model_on(server, db)
        worker_a.memo.refresh_seconds = 0.2
        ask(worker_a)  # worker A looks at the store (and pays for a question of its own)
        worker_b, _, _ = model_on(server, db)
        with scoped(**SCOPE), acting_as("condense"):
            worker_b.complete(question, max_tokens=50)  # worker B pays and records
            assert len(server.requests) == 2
            time.sleep(0.3)  # the rerun comes later, on worker A
            worker_a.complete(question, max_tokens=50)
        assert len(server.requests) == 2


def test_a_task_run_again_after_its_worker_was_lost_looks_at_the_store_afresh(db) -> None:
    """Dask reruns a lost worker's task on a worker that looked at the store a moment before
    the lost one recorded its last answers: within the refresh interval that worker would pay
    for them again, unless the rerun makes it look again (flows/attempts.py does)."""
    question = [Message(role="user", content="What does the GIL protect? (asked before a kill)")]
    with ScriptedServer(default=answering()) as server:
        survivor, _, _ = model_on(server, db)
        ask(survivor)  # it has looked at the store: its refresh interval starts now
        lost, _, _ = model_on(server, db)
        with scoped(**SCOPE), acting_as("condense"):
            lost.complete(question, max_tokens=50)  # recorded, then its process is killed
            assert len(server.requests) == 2
            survivor.memo.look_again()  # the rerun's attempt note
            survivor.complete(question, max_tokens=50)
        assert len(server.requests) == 2


def test_an_answer_is_in_the_store_before_the_call_returns_on_a_losable_worker(db) -> None:
    """A process that may be killed (a Dask worker) has lost no answer it already paid for:
    each is written before its call returns, so a task killed after its last call and before it
    reported back is served that answer when it runs again. Elsewhere answers wait in a batch.
    (Before, the answer waited for the task's next call: a last call's was lost with the worker,
    and the Dask test that kills one mid-batch saw a call paid twice, now and then.)"""
    since = datetime.now(timezone.utc) - timedelta(hours=1)
    with ScriptedServer(default=answering()) as server:
        model, memo, _ = model_on(server, db, batch_seconds=3_600)  # nothing written for an hour
        ask(model)
        assert MemoStore(db).fingerprints(since) == set()
        memo.write_first = True  # as on a Dask worker (tasks.contexts.losable)
        second = [Message(role="user", content="What does the GIL protect? (the last call)")]
        with scoped(**SCOPE), acting_as("condense"):
            model.complete(second, max_tokens=50)
        assert len(MemoStore(db).fingerprints(since)) == 2  # the batch's, and this one at once
