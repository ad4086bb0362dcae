"""Smoke test of bench/overflow.py: four scenarios through the real SDKs on loopback."""

from __future__ import annotations

import pytest

from bench.overflow import goal_misses, main, run
from bench.scenarios import smoke_scenarios


def test_smoke_table_has_both_policies_and_ours_meets_the_goal(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert "anchor: fail ok window" in out and "ours: fail ok window" in out
    for name in ("findings-zh-2x", "findings-en-2x-no-numbers", "transcript-en-big-first"):
        assert name in out
    summary = [line for line in out.splitlines() if line.startswith("overflows never recovered")]
    assert summary and "| anchor " in summary[0] and "| ours 0 of 4" in summary[0]
    assert "ours meets the goal" in out and ": yes" in out


def test_anchor_fails_on_chinese_and_ours_recovers_in_one_call() -> None:
    rows = {(r.scenario.name, r.policy): r for r in run(smoke_scenarios()[:1])}
    anchor, ours = rows[("findings-zh-2x", "anchor")], rows[("findings-zh-2x", "ours")]
    assert not anchor.recovered and anchor.failed_calls == 4  # x4 chars is 4x too much
    assert ours.recovered and ours.failed_calls == 1 and ours.share >= 0.8
    assert not goal_misses([ours])
