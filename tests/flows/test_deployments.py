"""The deployments users schedule: built from the real flows, with the schedule and parameters.

Fast checks of what `researchflow serve` and deployments/prefect.yaml define; running them
against a real Prefect server is tests/flows/test_deployment_server.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import prefect
import yaml
from prefect.settings import PREFECT_API_URL, temporary_settings
from typer.testing import CliRunner

from flows import serve as served
from flows.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _never_serve(*deployments) -> None:
    raise AssertionError("served without a Prefect server")


def _yaml() -> dict:
    return yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text(encoding="utf-8"))


def test_serve_builds_a_nightly_batch_and_an_adhoc_topic_with_zone_and_store(tmp_path,
                                                                              monkeypatch):
    built = []
    monkeypatch.setattr(prefect, "serve", lambda *deployments: built.extend(deployments))
    monkeypatch.setattr(served, "_api_url", lambda: "http://127.0.0.1:1/api")
    monkeypatch.setenv("RESEARCHFLOW_BATCH_CRON", "30 5 * * 1-5")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.csv").write_text("topic\nWhat is a lock?\n", encoding="utf-8")
    result = runner.invoke(app, ["serve", "--csv", "mine.csv", "--db", "out/reports.duckdb",
                                 "--timezone", "Europe/Berlin"])
    assert result.exit_code == 0, result.output
    by_name = {d.name: d for d in built}
    nightly, adhoc = by_name["nightly-served"], by_name["adhoc-served"]
    assert nightly.flow_name == "research-batch" and adhoc.flow_name == "research-topic"
    store = str(tmp_path.resolve() / "out" / "reports.duckdb")
    # The zone names each run's edition (the date it was scheduled for, there).
    assert nightly.parameters == {"csv_path": str(tmp_path.resolve() / "mine.csv"),
                                  "db_path": store, "timezone": "Europe/Berlin"}
    assert adhoc.parameters == {"db_path": store}
    schedule = nightly.schedules[0].schedule
    assert (schedule.cron, schedule.timezone) == ("30 5 * * 1-5", "Europe/Berlin")
    # Loaded by module, not by a path relative to wherever serving started.
    assert nightly.entrypoint == "flows.batch.research_batch"
    assert adhoc.entrypoint == "flows.topic.research_topic"
    assert store in result.output and "nightly-served" in result.output


def test_serve_defaults_the_zone_from_the_environment_else_utc(monkeypatch):
    deployments = served.served_deployments(served.DEFAULT_CSV, "0 6 * * *", "UTC",
                                            Path("/tmp/x.duckdb"))
    assert deployments[0].schedules[0].schedule.timezone == "UTC"
    assert deployments[0].parameters["csv_path"] == str(ROOT / "examples" / "topics.csv")
    monkeypatch.setattr(served, "_api_url", lambda: "http://127.0.0.1:1/api")
    built = []
    monkeypatch.setattr(prefect, "serve", lambda *deployments: built.extend(deployments))
    monkeypatch.setenv("RESEARCHFLOW_BATCH_TIMEZONE", "America/New_York")
    assert runner.invoke(app, ["serve"]).exit_code == 0
    assert built[0].schedules[0].schedule.timezone == "America/New_York"


def test_serve_refuses_without_a_prefect_server(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(prefect, "serve", _never_serve)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        result = runner.invoke(app, ["serve"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    line = " ".join(result.output.split())
    assert "make ui" in line and "export PREFECT_API_URL=http://127.0.0.1:4200/api" in line


def test_serve_refuses_an_unknown_zone_a_bad_cron_and_a_missing_csv(tmp_path):
    zone = runner.invoke(app, ["serve", "--timezone", "Mars/Olympus"])
    assert zone.exit_code == 2 and "unknown time zone 'Mars/Olympus'" in zone.output
    cron = runner.invoke(app, ["serve", "--cron", "6 every day"])
    assert cron.exit_code == 2 and "--cron" in cron.output
    csv = runner.invoke(app, ["serve", "--csv", str(tmp_path / "none.csv")])
    assert csv.exit_code == 2 and "no such file" in csv.output


def test_the_serve_script_is_researchflow_serve():
    done = subprocess.run([sys.executable, str(ROOT / "deployments" / "serve.py"), "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--timezone" in done.stdout and "--db" in done.stdout


def test_prefect_yaml_points_at_real_flow_entrypoints():
    for deployment in _yaml()["deployments"]:
        module, func = deployment["entrypoint"].split(":")
        assert (ROOT / module).is_file()
        assert f"def {func}(" in (ROOT / module).read_text(encoding="utf-8")


def test_prefect_yaml_needs_no_environment_and_names_its_deployments_apart():
    config = _yaml()
    names = {d["name"] for d in config["deployments"]}
    assert names == {"nightly-pool", "adhoc-pool"}
    assert not names & {served.BATCH_DEPLOYMENT, served.TOPIC_DEPLOYMENT}
    # The working directory and every path come from the deploy-time step, not the worker's env.
    [build] = config["build"]
    assert build["prefect.deployments.steps.run_shell_script"]["id"] == "repo"
    [pull] = config["pull"]
    assert pull["prefect.deployments.steps.set_working_directory"]["directory"] == \
        "{{ repo.stdout }}"
    assert "$" not in yaml.safe_dump(config)
    for deployment in config["deployments"]:
        assert deployment["parameters"]["db_path"] == "{{ repo.stdout }}/researchflow.duckdb"
    nightly = next(d for d in config["deployments"] if d["name"] == "nightly-pool")
    assert nightly["parameters"]["csv_path"] == "{{ repo.stdout }}/examples/topics.csv"
    assert nightly["schedules"][0]["timezone"] == "UTC"
    assert nightly["parameters"]["timezone"] == nightly["schedules"][0]["timezone"]
