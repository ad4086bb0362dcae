"""The code part of every task's cache key: what `core/` does, not how its comments read, so a
checkout updated between a failure and its retry reuses finished calls unless the code changed."""

from __future__ import annotations

from tasks.caching import _code_only, core_fingerprint

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
