"""Our exceptions cross process boundaries (a Dask worker's failure, a persisted Prefect result)
pickled, and come back with their type and fields: a topic over budget must still read as over
budget, a refused page still as refused."""

from __future__ import annotations

import pickle

from core.signals import BudgetExceeded, Fatal, RateLimited
from core.search.fetch_types import PageRefused, PageUnavailable
from core.search.guard import UnsafeURL


def _round_trip(exc: BaseException) -> BaseException:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc) and back.args == exc.args
    return back


def test_signals_keep_their_keyword_fields() -> None:
    budget = _round_trip(BudgetExceeded("topic budget reached", scope="batch", spent=1.5,
                                        limit=2.0, projected=0.75, hint="raise the cap"))
    assert (budget.scope, budget.spent, budget.limit, budget.projected, budget.hint) == (
        "batch", 1.5, 2.0, 0.75, "raise the cap")
    limited = _round_trip(RateLimited("slow down", provider="openai", model="gpt-x",
                                      status=429, retry_after=7.0))
    assert (limited.provider, limited.retry_after) == ("openai", 7.0)
    fatal = _round_trip(Fatal("bad key", provider="anthropic", reason="auth"))
    assert fatal.reason == "auth"


def test_refused_pages_keep_url_and_reason() -> None:
    for cls in (PageRefused, PageUnavailable, UnsafeURL):
        back = _round_trip(cls("http://10.0.0.1/admin", "private address"))
        assert (back.url, back.reason) == ("http://10.0.0.1/admin", "private address")
