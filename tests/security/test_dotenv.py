"""A `.env` in the working directory cannot send a key from the environment to another server.

The attack: a folder (a cloned repository, a download) holds a `.env` naming a base URL, and the
user runs researchflow there with their real key in the environment. The real openai SDK is
pointed wherever the settings say; the loopback server the `.env` names records what reaches it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from core.llm.registry import make_model
from core.models import Message
from core.signals import Signal
from core.settings import Settings, api_key, run_config
from tests.fakes import providers as fake
from tests.fakes.http import Reply, ScriptedServer

ENV_KEY = "rf-real-environment-key-0123456789"
DOTENV_KEY = "rf-dotenv-local-server-key-987654"


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RESEARCHFLOW_OPENAI_API_KEY",
                 "RESEARCHFLOW_OPENAI_BASE_URL", "SERPAPI_API_KEY", "RESEARCHFLOW_STORE",
                 "RESEARCHFLOW_DASK_ADDRESS", "RESEARCHFLOW_FETCH_ALLOW_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture()
def planted():
    """The server a planted .env points at."""
    with ScriptedServer(default=Reply(200, fake.openai_completion("hello"))) as srv:
        yield srv


def _keys_received(server: ScriptedServer) -> list[str]:
    return [v for r in server.requests for k, v in r.headers.items() if k.lower() ==
            "authorization"]


def _call(settings: Settings) -> None:
    model = make_model("openai:gpt-4o-mini", settings)
    try:
        model.complete([Message(role="user", content="hi")], max_tokens=5)
    except Signal:
        pass  # the provider's own address is unreachable offline: only where it went matters


@pytest.mark.parametrize("variable", ["OPENAI_BASE_URL", "RESEARCHFLOW_OPENAI_BASE_URL"])
def test_a_dotenv_base_url_never_receives_the_environment_key(folder, planted, monkeypatch,
                                                              variable):
    (folder / ".env").write_text(f"{variable}={planted.url}/v1\n")
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    settings = Settings.load(request_timeout=2)
    assert settings.openai_base_url is None
    _call(settings)
    assert planted.requests == [], _keys_received(planted)


def test_a_dotenv_with_its_own_key_and_server_still_works(folder, planted):
    # A local model server configured in one file: the key in it goes where it says.
    (folder / ".env").write_text(f"OPENAI_BASE_URL={planted.url}/v1\n"
                                 f"OPENAI_API_KEY={DOTENV_KEY}\n")
    _call(Settings.load(request_timeout=5))
    assert _keys_received(planted) == [f"Bearer {DOTENV_KEY}"]


def test_a_dotenv_server_without_any_key_is_used(folder, planted):
    (folder / ".env").write_text(f"OPENAI_BASE_URL={planted.url}/v1\n")
    settings = Settings.load(request_timeout=5)
    assert settings.openai_base_url == f"{planted.url}/v1"
    model = make_model("openai-compatible:local-model", settings)
    assert model.complete([Message(role="user", content="hi")], max_tokens=5).text == "hello"


def test_the_environment_still_names_any_server(folder, planted, monkeypatch):
    (folder / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{planted.url}/v1")
    _call(Settings.load(request_timeout=5))
    assert _keys_received(planted) == [f"Bearer {ENV_KEY}"]


def test_a_serpapi_url_from_dotenv_is_dropped_when_the_key_is_the_environment_s(folder,
                                                                                 monkeypatch):
    (folder / ".env").write_text("RESEARCHFLOW_SERPAPI_BASE_URL=http://127.0.0.1:9\n")
    monkeypatch.setenv("SERPAPI_API_KEY", ENV_KEY)
    assert Settings.load().serpapi_base_url is None


@pytest.mark.parametrize("line, field", [
    ("RESEARCHFLOW_STORE=ducklake:postgres:dbname=rf host=198.51.100.7 user=rf", "store"),
    ("RESEARCHFLOW_DASK_ADDRESS=tcp://198.51.100.7:8786", "dask_address"),
    ("RESEARCHFLOW_FETCH_ALLOW_HOSTS=169.254.169.254", "fetch_allow_hosts"),
])
def test_where_credentials_or_code_go_is_read_from_the_environment_only(folder, monkeypatch,
                                                                         line, field):
    (folder / ".env").write_text(line + "\n")
    assert getattr(Settings.load(), field) is None
    name, value = line.split("=", 1)
    monkeypatch.setenv(name, value)
    assert getattr(Settings.load(), field) == value


def test_other_settings_still_come_from_dotenv(folder):
    (folder / ".env").write_text("RESEARCHFLOW_MAX_TOPIC_CONCURRENCY=3\n"
                                 "RESEARCHFLOW_MODEL=offline\n")
    settings = Settings.load()
    assert (settings.max_topic_concurrency, settings.model) == (3, "offline")


def test_a_client_built_from_a_run_config_finds_its_key_without_loading_settings(folder, planted,
                                                                                 monkeypatch):
    """A task builds its client from a RunConfig (no key in it): the key is the environment's,
    else the .env's, and a bad unrelated variable no longer fails the call (before: every client
    build loaded and validated all of Settings)."""
    (folder / ".env").write_text(f"OPENAI_BASE_URL={planted.url}/v1\n"
                                 f"OPENAI_API_KEY={DOTENV_KEY}\n")
    config = run_config(Settings.load(request_timeout=5, cache_dir=folder))
    monkeypatch.setenv("RESEARCHFLOW_MAX_TOPIC_CONCURRENCY", "not a number")
    assert api_key("openai").get_secret_value() == DOTENV_KEY
    model = make_model("openai:gpt-4o-mini", config)
    model.complete([Message(role="user", content="hi")], max_tokens=5)
    assert _keys_received(planted) == [f"Bearer {DOTENV_KEY}"]
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    assert api_key("openai").get_secret_value() == ENV_KEY  # the environment first
    monkeypatch.delenv("OPENAI_API_KEY")
    (folder / ".env").unlink()
    assert api_key("openai") is None


# Issue 35 (1, 4): a .env named a lake (and so where PGPASSWORD goes) through
# RESEARCHFLOW_DB_PATH, and where every search goes through RESEARCHFLOW_SEARXNG_URL.
PGPASSWORD = "rf-catalog-password-0042"


@pytest.fixture()
def catalog():
    from tests.fakes.pg_listener import PasswordListener

    with PasswordListener() as listener:
        yield listener


@pytest.mark.parametrize("command", [("query", "SELECT 1"), ("show", "r-1"),
                                     ("export", "r-1")])
def test_a_dotenv_lake_never_receives_the_environment_password(folder, catalog, monkeypatch,
                                                               command):
    from tests.security.conftest import cli

    (folder / ".env").write_text('RESEARCHFLOW_DB_PATH="ducklake:postgres:dbname=researchflow '
                                 f'host=127.0.0.1 port={catalog.port} user=rf"\n')
    monkeypatch.delenv("RESEARCHFLOW_DB_PATH", raising=False)
    monkeypatch.setenv("PGPASSWORD", PGPASSWORD)
    cli(*command)
    assert catalog.received == [] and not catalog.saw(PGPASSWORD)


def test_a_dotenv_lake_is_named_in_one_warning(folder, monkeypatch, caplog):
    from core import envfile

    monkeypatch.setattr(envfile, "_warned", set())
    (folder / ".env").write_text("RESEARCHFLOW_DB_PATH=ducklake:postgres:dbname=rf host=x\n")
    settings = Settings.load()
    assert settings.store_target() == str((folder / "researchflow.duckdb").resolve())
    lines = [r.getMessage() for r in caplog.records if "RESEARCHFLOW_DB_PATH" in r.getMessage()]
    assert len(lines) == 1 and "PGPASSWORD" in lines[0], lines


def test_a_dotenv_db_path_naming_a_file_is_still_read_as_a_file(folder):
    (folder / ".env").write_text("RESEARCHFLOW_DB_PATH=./ducklake:dir/x.duckdb\n")
    assert Settings.load().store_target() == str(folder / "ducklake:dir" / "x.duckdb")
    (folder / ".env").write_text("RESEARCHFLOW_DB_PATH=results/mine.duckdb\n")
    assert Settings.load().store_target() == str(folder / "results" / "mine.duckdb")


def test_the_environment_may_still_read_a_relative_ducklake_folder_as_a_file(folder,
                                                                             monkeypatch):
    monkeypatch.setenv("RESEARCHFLOW_DB_PATH", "./ducklake:dir/x.duckdb")
    assert Settings.load().store_target() == str(folder / "ducklake:dir" / "x.duckdb")


@pytest.mark.parametrize("line, field", [
    ("RESEARCHFLOW_SEARXNG_URL=http://127.0.0.1:18082", "searxng_url"),
    ("RESEARCHFLOW_LAKE_DATA_PATH=/mnt/elsewhere", "lake_data_path"),
])
def test_where_searches_and_lake_files_go_is_read_from_the_environment_only(folder, monkeypatch,
                                                                             line, field):
    (folder / ".env").write_text(line + "\n")
    assert getattr(Settings.load(), field) is None
    assert Settings.load().resolved_search() == "corpus"
    name, value = line.split("=", 1)
    monkeypatch.setenv(name, value)
    assert getattr(Settings.load(), field) == value


def test_every_destination_setting_is_on_the_list():
    """A new setting that names a host, a URL, an address, a store or a path must be decided:
    environment-only (`DESTINATIONS`), keyed to its provider's key (`KEYED_URLS`), or a folder of
    this machine (`LOCAL`)."""
    import re

    from core import envfile

    destination = re.compile(r"(^|_)(urls?|hosts?|address(es)?|store|lake|proxy|path|dir|"
                             r"endpoint|server|dsn|catalog)$", re.I)
    decided = set(envfile.DESTINATIONS) | set(envfile.KEYED_URLS) | set(envfile.LOCAL)
    undecided = [name for name in Settings.model_fields
                 if destination.search(name) and name not in decided]
    assert undecided == [], f"decide in core/envfile.py whether a .env may set {undecided}"


@pytest.mark.parametrize("line", ["PREFECT_API_URL=http://127.0.0.1:9/api",
                                  "HTTPS_PROXY=http://127.0.0.1:9",
                                  "PREFECT_SERVER_DATABASE_CONNECTION_URL=postgresql://x@h/db"])
def test_a_dotenv_line_another_program_would_follow_is_refused(folder, monkeypatch, line):
    """Prefect reads the working directory's .env itself: PREFECT_API_URL there would send every
    run, topic and parameter to the server it names."""
    from tests.security.conftest import cli

    name = line.split("=", 1)[0]
    monkeypatch.delenv(name, raising=False)
    (folder / ".env").write_text(line + "\n")
    result = cli("run", "what is a lock", "--model", "offline")
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and name in lines[0], result.output


@pytest.mark.parametrize("file, text, shown", [
    ("prefect.toml", '[api]\nurl = "http://127.0.0.1:9/api"\n', "api.url in ./prefect.toml"),
    ("pyproject.toml", '[tool.prefect.api]\nurl = "http://127.0.0.1:9/api"\n',
     "api.url in ./pyproject.toml"),
])
def test_a_prefect_address_in_the_folder_s_toml_is_refused(folder, monkeypatch, file, text,
                                                          shown):
    """Prefect reads prefect.toml and pyproject.toml [tool.prefect] from the working directory
    too: a cloned repository's api.url would receive every run."""
    from tests.security.conftest import cli

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    (folder / file).write_text(text)
    result = cli("run", "what is a lock", "--model", "offline")
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and shown in lines[0], result.output
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    from core.envfile import foreign_destinations

    assert foreign_destinations(folder) == []  # the environment names the server itself
