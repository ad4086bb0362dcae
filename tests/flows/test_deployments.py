"""The deployments users schedule: built from the real flows, with the schedule and parameters."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_serve_script_builds_a_nightly_batch_and_an_adhoc_topic(monkeypatch):
    spec = importlib.util.spec_from_file_location("serve", ROOT / "deployments" / "serve.py")
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)  # nothing is served at import
    built = []
    monkeypatch.setattr(serve, "serve", lambda *deployments: built.extend(deployments))
    monkeypatch.setenv("RESEARCHFLOW_BATCH_CRON", "30 5 * * 1-5")
    serve.main()
    by_name = {d.name: d for d in built}
    nightly, adhoc = by_name["nightly"], by_name["adhoc"]
    assert nightly.flow_name == "research-batch" and adhoc.flow_name == "research-topic"
    assert nightly.parameters["csv_path"].endswith("examples/topics.csv")
    assert nightly.schedules[0].schedule.cron == "30 5 * * 1-5"


def test_prefect_yaml_points_at_real_flow_entrypoints():
    config = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text(encoding="utf-8"))
    for deployment in config["deployments"]:
        module, func = deployment["entrypoint"].split(":")
        assert (ROOT / module).is_file()
        assert f"def {func}(" in (ROOT / module).read_text(encoding="utf-8")
