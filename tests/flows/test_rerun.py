"""Reruns reuse every finished call: a batch whose second topic is refused partway, rerun by the
CLI (a new run) and retried as `prefect flow-run retry` does (the same run, against a real
Prefect server), makes again only the call that had failed; stored topics are not run again
unless --refresh. Calls are counted on the loopback provider, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.store import query_readonly
from tests.fakes.rerun_scenario import RerunResult, RerunScenario

pytestmark = pytest.mark.slow


def _assert_reused(result) -> None:
    assert result.first_state == "FAILED" and result.first_failed == 1, result
    assert result.first_ok > 40, result  # the refused topic had done most of its work
    assert result.rerun_state == "COMPLETED", result
    assert result.repeated == 0, result
    assert result.rerun_calls == 1, result  # the report call that had been refused, once
    assert (result.reports, result.distinct_reports) == (2, 2), result


@pytest.fixture(scope="module")
def cli_rerun(tmp_path_factory, prefect_harness) -> tuple[RerunScenario, RerunResult]:
    """The batch, refused partway, then rerun as the CLI does: once for the module (~75 calls);
    afterwards both its topics are stored."""
    scenario = RerunScenario(tmp_path_factory.mktemp("cli-rerun"))
    return scenario, scenario.run("cli")


@pytest.mark.xdist_group("rerun-cli")
def test_a_cli_rerun_of_a_batch_repeats_no_call_that_had_succeeded(cli_rerun):
    _assert_reused(cli_rerun[1])


def test_a_retry_of_the_failed_flow_run_on_a_real_server_repeats_no_call(tmp_path: Path,
                                                                         prefect_server):
    _assert_reused(RerunScenario(tmp_path).run("retry", api_url=prefect_server))


def test_researchflow_retry_of_a_cli_run_on_a_real_server_repeats_no_call(tmp_path: Path,
                                                                          prefect_server):
    # A CLI run has no deployment: `researchflow retry` names its flow's entrypoint.
    _assert_reused(RerunScenario(tmp_path).run("researchflow-retry", api_url=prefect_server))


@pytest.mark.xdist_group("rerun-cli")
def test_stored_topics_are_skipped_unless_refresh(cli_rerun):
    from flows.batch import research_batch
    from tests.fakes.http import ScriptedServer
    from tests.fakes.research_provider import SDK_ENV

    scenario, result = cli_rerun  # every topic of the batch is stored
    assert result.rerun_state == "COMPLETED", result
    _, stored = query_readonly(scenario.db, "SELECT topic, report_id FROM topics "
                                            f"WHERE batch_id = '{scenario.batch_id}'")
    # A whole run of the batch: what the first run made and the rerun added.
    whole = result.first_ok + result.rerun_calls
    key_var, url_var, suffix = SDK_ENV["openai"]
    with ScriptedServer(default=scenario.provider) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv(key_var, "sk-test-not-a-real-key")
        mp.setenv(url_var, server.url + suffix)
        made = scenario.provider.calls
        again = research_batch(**scenario.parameters())
        assert scenario.provider.calls == made  # nothing ran: both reports were stored
        assert [o["reused"] for o in again] == [True, True]
        assert {o["topic"]: o["report_id"] for o in again} == dict(stored)

        fresh = research_batch(**scenario.parameters(), refresh=True)
        assert scenario.provider.calls == made + whole  # every call made again, none reused
        assert [o["reused"] for o in fresh] == [False, False]
        assert all(o["status"] == "succeeded" for o in fresh)
