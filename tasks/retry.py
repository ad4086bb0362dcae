"""When Prefect should retry a task: rate limits and transient faults only.

`ContextOverflow` is handled inside the task by shrinking (waiting never helps), `Fatal` and
`BudgetExceeded` fail at once. A rate limit that names a wait longer than we are willing to sleep
in a run (for example a daily quota's "retry after 86400 seconds") fails now with that number in
the message. A page that could not be read for a passing reason (`PageFault`: a 5xx, a timeout)
is read again a couple of times, then given up for this run (the research step notes it, and
nothing remembers it as unreadable).

Nothing here waits: Prefect's backoff is the delay between attempts, and a provider's own
retry-after is honoured where the next attempt starts. Every provider call passes its
provider's gate (core.accounting.pacing), paused for the retry-after the provider named, and a
page's host is paused for its Retry-After (core.search.hosts), so one worker's rate limit slows
every worker down, not just the one that was told.
"""

from __future__ import annotations

import logging

from prefect.tasks import exponential_backoff

from core.signals import RateLimited, Signal, Transient
from core.search.fetch_types import PageFault
from core.settings import Settings

# Six attempts per call: at a 30% fault rate one call then fails for good about once in 1,400.
RETRIES = 5
# 2, 4, 8, 16, 32 s before jitter by default (RESEARCHFLOW_RETRY_BACKOFF: the first delay).
RETRY_DELAYS = exponential_backoff(backoff_factor=Settings.load().retry_backoff)
RETRY_JITTER = 0.5
MAX_HONOURED_WAIT = 300.0  # seconds; beyond this a retry inside the run is pointless
PAGE_ATTEMPTS = 3  # a page that keeps failing costs its sub-question one page, not the run

log = logging.getLogger("researchflow.retry")


def retry_on_signal(task, task_run, state) -> bool:
    """Prefect retry_condition_fn: retry RateLimited and Transient (a page, a few times)."""
    try:
        state.result()
    except RateLimited as exc:
        if exc.retry_after is not None and exc.retry_after > MAX_HONOURED_WAIT:
            log.error("rate limited for %.0f s (over %.0f s): not retrying in this run",
                      exc.retry_after, MAX_HONOURED_WAIT)
            return False
        return True
    except PageFault:
        return task_run.run_count < PAGE_ATTEMPTS
    except Transient:
        return True
    except BaseException:  # noqa: BLE001 - overflow that could not shrink, Fatal, budget, bugs
        return False
    return False


def note_attempts(task, task_run, state) -> None:
    """Prefect on_failure hook: remember on the signal how many attempts the failing step made,
    so the topic's error can say "after 4 attempts". The innermost step's count wins."""
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, Signal) and getattr(exc, "attempts", None) is None:
        exc.attempts = task_run.run_count


RETRYING = dict(retries=RETRIES, retry_delay_seconds=RETRY_DELAYS, retry_jitter_factor=RETRY_JITTER,
                retry_condition_fn=retry_on_signal, on_failure=[note_attempts])
