"""A failure the user fixed is not replayed: a batch whose second topic has no page is refused
(NoEvidence); the user adds the page; the batch run again by the CLI, by Prefect's retry of the
same flow run on a real server, or by `researchflow retry`, reads the new page and stores the
report. The first topic's work, which the new page does not touch, is not asked again."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store import query_readonly
from tests.fakes.fix_scenario import FixResult, FixScenario

pytestmark = pytest.mark.slow


def _assert_fixed(result: FixResult) -> None:
    assert result.first_state == "FAILED" and result.first_failed == 1, result
    assert "deadlock" in result.first_error and "no page" in result.first_error.lower() \
        or "evidence" in result.first_error.lower(), result
    assert result.rerun_state == "COMPLETED", result
    assert result.reports == 2, result
    assert result.repeated == 0, result  # nothing answered before is asked again, byte for byte
    # The rerun reads the new page and writes the refused topic's report; the stored topic is
    # skipped, so the rerun costs a fraction of the first run.
    assert 0 < result.rerun_calls < result.first_calls, result
    print(result)  # the figures of the closing note


def test_a_cli_rerun_after_the_user_adds_the_page_stores_the_report(tmp_path: Path,
                                                                    prefect_harness):
    scenario = FixScenario(tmp_path)
    result = scenario.run("cli")
    _assert_fixed(result)
    _, rows = query_readonly(scenario.db, "SELECT markdown FROM reports "
                                          "WHERE topic LIKE '%deadlock%'")
    assert "deadlocks.md" in rows[0][0] or "Deadlock" in rows[0][0], rows[0][0][:400]


def test_a_retry_of_the_flow_run_after_the_fix_reads_the_new_page(tmp_path: Path,
                                                                  prefect_server):
    result = FixScenario(tmp_path).run("retry", api_url=prefect_server)
    _assert_fixed(result)
    # The rerun's calls that the new page did not change are served (from Prefect's cache or
    # the call memo) rather than asked again.
    assert result.rerun_served + max(result.rerun_cached, 0) > 0, result


def test_researchflow_retry_after_the_fix_reads_the_new_page(tmp_path: Path, prefect_server):
    _assert_fixed(FixScenario(tmp_path).run("researchflow-retry", api_url=prefect_server))
