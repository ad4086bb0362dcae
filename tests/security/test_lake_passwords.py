"""A DuckLake password never travels in a target, whatever form it is written in (issue 35,
item 6): `password=` was refused, a URI's `user:PW@` reached the terminal six times and Prefect's
database (the `db_path` parameter, the state message)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import secrets
from core.store import lake
from core.store.redaction import public_settings
from tests.security.conftest import cli

PW = "PW-lake-4242xyz"
URI = f"ducklake:postgres:postgresql://rf:{PW}@127.0.0.1:15432/researchflow"


@pytest.mark.parametrize("command", [("run", "what is a lock", "--model", "offline"),
                                     ("batch", "{csv}"), ("query", "SELECT 1"),
                                     ("show", "r-1"), ("export", "r-1"),
                                     ("serve", "--csv", "{csv}"), ("mcp",)])
def test_a_password_in_a_uri_target_is_refused_in_one_line(tmp_path: Path, command) -> None:
    csv = tmp_path / "topics.csv"
    csv.write_text("topic\nwhat is a lock\n")
    result = cli(*(part.format(csv=csv) for part in command), "--db", URI)
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "password" in lines[0], result.output
    assert PW not in result.output


def test_a_password_in_a_uri_target_is_refused_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RESEARCHFLOW_STORE", URI)
    result = cli("run", "what is a lock", "--model", "offline")
    assert result.exit_code == 2 and PW not in result.output, result.output


@pytest.mark.parametrize("shown", [URI, URI.replace("//", "/"),
                                   "ducklake:postgres:dbname=rf password=" + PW + " host=h"])
def test_a_target_is_shown_without_its_password(shown: str) -> None:
    assert PW not in lake.masked(shown)
    assert PW not in secrets.mask(f"cannot open {shown}")
    assert PW not in str(public_settings({"db_path": shown}))
    with pytest.raises(Exception, match="password"):
        lake.check_spec(shown)


def test_a_target_without_a_password_still_passes() -> None:
    for spec in ("ducklake:postgres:dbname=rf host=db user=rf",
                 "ducklake:postgres:postgresql://rf@db/researchflow"):
        lake.check_spec(spec)
        assert lake.masked(spec) == spec
