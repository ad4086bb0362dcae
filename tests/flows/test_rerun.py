"""Reruns reuse every finished call: a batch whose second topic is refused partway, rerun by the
CLI (a new run) and retried as `prefect flow-run retry` does (the same run, against a real
Prefect server), makes again only the call that had failed; stored topics are not run again
unless --refresh. Calls are counted on the loopback provider, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.rerun_scenario import RerunScenario

pytestmark = pytest.mark.slow


def _assert_reused(result) -> None:
    assert result.first_state == "FAILED" and result.first_failed == 1, result
    assert result.first_ok > 40, result  # the refused topic had done most of its work
    assert result.rerun_state == "COMPLETED", result
    assert result.repeated == 0, result
    assert result.rerun_calls == 1, result  # the report call that had been refused, once
    assert (result.reports, result.distinct_reports) == (2, 2), result


def test_a_cli_rerun_of_a_batch_repeats_no_call_that_had_succeeded(tmp_path: Path,
                                                                   prefect_harness):
    _assert_reused(RerunScenario(tmp_path).run("cli"))


def test_a_retry_of_the_failed_flow_run_on_a_real_server_repeats_no_call(tmp_path: Path):
    _assert_reused(RerunScenario(tmp_path).run("retry"))


def test_researchflow_retry_of_a_cli_run_on_a_real_server_repeats_no_call(tmp_path: Path):
    # A CLI run has no deployment: `researchflow retry` names its flow's entrypoint.
    _assert_reused(RerunScenario(tmp_path).run("researchflow-retry"))


def test_stored_topics_are_skipped_unless_refresh(tmp_path: Path, prefect_harness):
    from flows.batch import research_batch
    from tests.fakes.http import ScriptedServer
    from tests.fakes.research_provider import SDK_ENV

    scenario = RerunScenario(tmp_path)
    scenario.provider.refusing = False
    key_var, url_var, suffix = SDK_ENV["openai"]
    with ScriptedServer(default=scenario.provider) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv(key_var, "sk-test-not-a-real-key")
        mp.setenv(url_var, server.url + suffix)
        first = research_batch(**scenario.parameters())
        made = scenario.provider.calls
        again = research_batch(**scenario.parameters())
        assert scenario.provider.calls == made  # nothing ran: both reports were stored
        assert [o["reused"] for o in again] == [True, True]
        assert [o["report_id"] for o in again] == [o["report_id"] for o in first]

        fresh = research_batch(**scenario.parameters(), refresh=True)
        assert scenario.provider.calls == 2 * made  # every call made again, none reused
        assert [o["reused"] for o in fresh] == [False, False]
        assert all(o["status"] == "succeeded" for o in fresh)
