"""The retry predicate on real Prefect states, and the house rule that core never imports Prefect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from prefect.states import Failed

from core.signals import ContextOverflow, Fatal, RateLimited, Transient
from tasks import retry
from tasks.retry import retry_on_signal

ROOT = Path(__file__).resolve().parents[2]


def _check(exc: BaseException, *, delays=(2.0, 4.0, 8.0), run_count: int = 1) -> bool:
    task = SimpleNamespace(retry_delay_seconds=list(delays))
    return retry_on_signal(task, SimpleNamespace(run_count=run_count), Failed(data=exc))


@pytest.mark.parametrize("exc, expected", [
    (Transient("connection reset"), True),
    (RateLimited("slow down"), True),
    (ContextOverflow("too long", limit=8192, requested=9000), False),  # shrink, never wait
    (Fatal("bad key", reason="auth"), False),
    (ValueError("a bug"), False),
])
def test_only_rate_limits_and_transient_faults_are_retried(exc, expected):
    assert _check(exc) is expected


def test_a_wait_longer_than_a_run_should_sleep_is_not_retried():
    assert _check(RateLimited("daily quota", retry_after=86_400)) is False


def test_the_predicate_never_waits_the_gate_does(monkeypatch):
    """Prefect cannot see a wait inside retry_condition_fn: the provider's retry-after pauses
    its gate instead, where the next attempt starts (a running task the UI shows)."""
    import threading
    import time

    from core.accounting.pacing import ProviderGate

    # Only this thread's sleeps fail: a daemon thread of an earlier test (the store's reaper)
    # sleeps too, and a failure raised there would end it for the rest of the worker's tests.
    real_sleep, mine = time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:
        if threading.get_ident() == mine:
            pytest.fail(f"the predicate slept {seconds} s")
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    assert _check(RateLimited("wait", retry_after=9.0), delays=(2.0, 4.0), run_count=1)
    now = [100.0]
    slept: list[float] = []
    gate = ProviderGate(clock=lambda: now[0], sleep=lambda s: (slept.append(s),
                                                               now.__setitem__(0, now[0] + s)))
    gate.rate_limited(9.0)
    now[0] += 2.0  # Prefect's backoff before the next attempt
    assert gate.wait() == pytest.approx(7.0) and slept == [pytest.approx(7.0)]


def test_a_page_that_may_come_back_is_read_three_times_at_most():
    from core.search.fetch_types import PageFault

    fault = PageFault("https://example.org/a", "HTTP 503", retry_after=1.0)
    assert [_check(fault, run_count=n) for n in (1, 2, 3)] == [True, True, False]


def test_the_shipped_backoff_doubles_from_2_s_and_0_retries_at_once(tmp_path):
    # The suite itself runs with RESEARCHFLOW_RETRY_BACKOFF=0 (tests/conftest.py) ...
    from tasks.research import plan_topic, read_hit

    assert plan_topic.retry_delay_seconds == read_hit.retry_delay_seconds == [0] * retry.RETRIES
    # ... a user's process, unset, waits 2, 4, 8, 16, 32 s (before jitter) between attempts.
    code = ("import json; from tasks import research, write\n"
            "print(json.dumps([research.plan_topic.retry_delay_seconds, "
            "research.read_hit.retry_delay_seconds, write.write_report.retry_delay_seconds]))")
    env = {k: v for k, v in os.environ.items() if k != "RESEARCHFLOW_RETRY_BACKOFF"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [[2, 4, 8, 16, 32]] * 3
    assert retry.RETRY_JITTER == 0.5


def test_core_never_imports_prefect():
    for path in (ROOT / "core").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "import prefect" not in text and "from prefect" not in text, path
    code = ("import sys, pkgutil, importlib, core\n"
            "for m in pkgutil.walk_packages(core.__path__, 'core.'):\n"
            "    importlib.import_module(m.name)\n"
            "print('prefect' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
