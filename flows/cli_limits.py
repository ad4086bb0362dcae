"""`researchflow limits PROVIDER...`: set up the provider limits every worker shares, on the
Prefect server in PREFECT_API_URL (tasks/shared_pacing.py), and show them.

A worker creates a provider's limit on its first call from its own settings; this command sets
it beforehand, or changes it, for every worker at once (the UI's Concurrency page lists it and
can change it too). Without figures it only shows what the server holds.
"""

from __future__ import annotations

import os
from typing import Optional

import typer

from flows.console import fail, out, plain


def limits(providers: list[str] = typer.Argument(
               ..., help="Providers as a model spec names them: openai, anthropic, gemini, "
               "openai-compatible, serpapi, searxng."),
           calls_per_minute: Optional[int] = typer.Option(
               None, "--calls-per-minute", min=1, help="Calls a minute to each provider, "
               "every worker together (default: RESEARCHFLOW_MAX_CALLS_PER_MINUTE)."),
           tokens_per_minute: Optional[int] = typer.Option(
               None, "--tokens-per-minute", min=1, help="Tokens a minute asked of each "
               "provider, every worker together (default: RESEARCHFLOW_MAX_TOKENS_PER_MINUTE)."),
           ) -> None:
    """Create or change the Prefect concurrency limits that pace each provider for every
    worker (researchflow-PROVIDER-calls, researchflow-PROVIDER-tokens), and show them."""
    from prefect.settings import PREFECT_API_URL

    if not (os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()):
        fail("no Prefect server (PREFECT_API_URL is not set): shared limits live on the server "
             "every worker talks to; without one each process paces itself")
    from core.settings import Settings
    from tasks.shared_pacing import LimitNames, calls_limit, ensure_limit, tokens_limit

    settings = Settings.load()
    calls = calls_per_minute or settings.max_calls_per_minute
    tokens = tokens_per_minute or settings.max_tokens_per_minute
    try:
        for provider in providers:
            names = LimitNames(provider)
            if calls:
                done = ensure_limit(names.calls, *calls_limit(calls), update=True)
                out.print(plain(f"{names.calls}: {calls} calls a minute ({done})"))
            if tokens:
                done = ensure_limit(names.tokens, *tokens_limit(tokens), update=True)
                out.print(plain(f"{names.tokens}: {tokens} tokens a minute ({done})"))
            _show(names)
    except Exception as exc:  # noqa: BLE001 - the server's refusal, said in one line
        fail(f"the Prefect server refused: {type(exc).__name__}: {exc}")


def _show(names) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        for name in (names.calls, names.tokens):
            try:
                found = client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                out.print(plain(f"{name}: none (no cap shared)"))
                continue
            per_minute = round(found.slot_decay_per_second * 60)
            out.print(plain(f"{name}: {found.limit} slot(s), {found.slot_decay_per_second:g} "
                            f"freed a second (~{per_minute} a minute)"
                            + ("" if found.active else ", inactive")))
        paused = client.read_variable_by_name(names.pause)
    if paused is not None:
        import time

        left = float(paused.value) - time.time() if isinstance(paused.value, (int, float)) else 0
        if left > 0:
            out.print(plain(f"{names.pause}: paused for {left:.0f} s more"))
