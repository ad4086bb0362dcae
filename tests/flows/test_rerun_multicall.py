"""Reruns after a refusal inside a multi-call step repeat no successful call (issue 20): the
second piece of a page condensed in pieces, the re-ask after a prose answer to a JSON question,
and the second half of a page halved after an overflow. Each case is a two-topic batch through
the real openai SDK against the loopback research provider (tests/fakes/rerun_scenario.py),
rerun by the CLI (a new run) and retried as `prefect flow-run retry` does (the same flow run,
against a real Prefect server); calls are counted on the provider, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store import query_readonly
from tests.fakes.rerun_scenario import RerunScenario

pytestmark = pytest.mark.slow

CASES = ("chunked", "reask", "shrink")


def _assert_paid_once(scenario: RerunScenario, result) -> None:
    assert result.first_state == "FAILED" and result.first_failed == 1, result
    assert scenario.provider.refused >= 1, result  # the multi-call step was reached
    if scenario.case == "shrink":
        assert scenario.provider.overflows >= 1, result
    assert result.rerun_state == "COMPLETED", result
    assert result.repeated == 0, result
    assert (result.reports, result.distinct_reports) == (2, 2), result
    # What the refused step had been answered was served from the memo, at no cost.
    _, served = query_readonly(scenario.db, "SELECT count(*), coalesce(sum(cost_usd), 0) "
                                            "FROM ledger WHERE outcome = 'served'")
    assert served[0][0] >= 1 and served[0][1] == 0, served


@pytest.mark.parametrize("case", CASES)
@pytest.mark.usefixtures("prefect_harness")
def test_a_cli_rerun_after_a_refusal_inside_a_multi_call_step_repeats_no_call(
        tmp_path: Path, case: str) -> None:
    scenario = RerunScenario(tmp_path, case=case)
    _assert_paid_once(scenario, scenario.run("cli"))


@pytest.mark.parametrize("case", CASES)
def test_a_retry_of_the_flow_run_after_a_refusal_inside_a_multi_call_step_repeats_no_call(
        tmp_path: Path, prefect_server, case: str) -> None:
    scenario = RerunScenario(tmp_path, case=case)
    _assert_paid_once(scenario, scenario.run("retry", api_url=prefect_server))
