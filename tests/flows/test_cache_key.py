"""The code part of every task's cache key: what `core/` does, not how its comments read, so a
checkout updated between a failure and its retry reuses finished calls unless the code changed."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.caching import _code_only, code_fingerprint, core_fingerprint

BEFORE = '''"""A module."""


def grow(x: int) -> int:
    """Add one."""
    # the smallest step
    return x + 1
'''


def test_comments_docstrings_and_layout_do_not_change_the_key() -> None:
    reworded = BEFORE.replace('"""Add one."""', '"""Add one, always."""').replace(
        "# the smallest step", "# one step, and a longer comment") + "\n\n# trailing note\n"
    relaid = 'def grow(x: int) -> int:\n    return (x\n            + 1)\n'
    assert _code_only(BEFORE) == _code_only(reworded) == _code_only(relaid)


def test_a_change_in_what_the_code_does_changes_the_key() -> None:
    assert _code_only(BEFORE) != _code_only(BEFORE.replace("x + 1", "x + 2"))
    assert _code_only(BEFORE) != _code_only(BEFORE.replace("def grow", "def grown"))


def test_the_fingerprint_is_stable_within_a_process() -> None:
    assert core_fingerprint() == core_fingerprint() and len(core_fingerprint()) == 16


def _package(root: Path, body: str) -> Path:
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    (root / "pkg" / "mod.py").write_text(body, encoding="utf-8")
    return root / "pkg"


def test_the_remembered_fingerprint_is_the_parsed_one_and_follows_the_code(tmp_path) -> None:
    package, memo = _package(tmp_path, BEFORE), tmp_path / "cache" / "memo.json"
    parsed = code_fingerprint(package, tmp_path / "elsewhere.json")
    assert code_fingerprint(package, memo) == parsed  # computed, then remembered
    assert len(json.loads(memo.read_text())) == 1
    memo.write_text(json.dumps({k: "remembered" for k in json.loads(memo.read_text())}))
    assert code_fingerprint(package, memo) == "remembered"  # read back, not parsed again
    _package(tmp_path, BEFORE.replace("x + 1", "x + 2"))
    assert code_fingerprint(package, memo) not in (parsed, "remembered")  # new bytes: parsed
    _package(tmp_path, BEFORE + "\n# a comment\n")
    assert code_fingerprint(package, memo) == parsed  # new bytes, same code: same key


def test_a_broken_or_unwritable_memo_only_costs_the_parse(tmp_path) -> None:
    package = _package(tmp_path, BEFORE)
    parsed = code_fingerprint(package, tmp_path / "a.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert code_fingerprint(package, broken) == parsed
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert code_fingerprint(package, blocked / "memo.json") == parsed  # its folder is a file


def test_nothing_found_is_not_served_from_the_cache(tmp_path, prefect_harness) -> None:
    """A task that found nothing keeps its answer out of the cache; one that found something
    is served next time (real Prefect engine, results in a folder of this test)."""
    from prefect import flow, task
    from prefect.cache_policies import INPUTS
    from prefect.settings import PREFECT_LOCAL_STORAGE_PATH, temporary_settings

    from tasks.caching import keep_out_of_cache

    calls: list[str] = []

    @task(cache_policy=INPUTS, persist_result=True)
    def look(query: str) -> list[str]:
        calls.append(query)
        found = [] if query == "nothing" else [query]
        if not found:
            keep_out_of_cache()
        return found

    @flow
    def twice() -> None:
        for _ in range(2):
            look("nothing")
            look("something")

    with temporary_settings({PREFECT_LOCAL_STORAGE_PATH: tmp_path}):
        twice()
    assert calls == ["nothing", "something", "nothing"]
