"""What a `.env` file in the working directory may set, read beside the real environment.

Anyone who can write to the folder a command starts in can plant a `.env` there: a cloned
repository, a shared checkout, an unpacked download. It is read with the user's own environment
beside it, so the rule is about where the user's credentials (and code) may be sent:

- A provider's base URL (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `RESEARCHFLOW_GEMINI_BASE_URL`,
  `RESEARCHFLOW_SERPAPI_BASE_URL`, and the `RESEARCHFLOW_` forms of the first two) is taken from
  a `.env` only while that provider's key is not set in the environment or on the command line:
  the key then comes from the same `.env`, or there is none. A key from your environment only
  ever goes to an address your environment or command line names, or the provider's own.
- Every other setting that names a network destination or a store (`DESTINATIONS`) comes
  from the environment only: the lake and its catalog (`RESEARCHFLOW_STORE`, a
  `RESEARCHFLOW_DB_PATH` written `ducklake:...`: libpq would hand the catalog `PGPASSWORD`;
  `RESEARCHFLOW_LAKE_DATA_PATH`, where the lake's Parquet files go), SearXNG (every query built
  from a topic goes there, and its address is exempt from the fetcher's guard), the Dask
  scheduler (it is sent pickled work and results: code), and `RESEARCHFLOW_FETCH_ALLOW_HOSTS`
  (private addresses the fetcher may then read). A `RESEARCHFLOW_DB_PATH` naming a file may be
  set in a `.env`. tests/security/test_dotenv.py fails when a setting whose name says url,
  host, address, store, lake, proxy or path is on neither this list nor `LOCAL`.
- Other programs read the same folder: Prefect takes its settings from `.env`, `prefect.toml`
  and `pyproject.toml` [tool.prefect] there (PREFECT_API_URL, or `api.url`, would send every
  run, topic and parameters to the server it names). `foreign_destinations` lists such
  settings (`FOREIGN`: Prefect's addresses and databases, and proxy variables, which nothing
  here reads from a `.env`); the commands refuse to start while one is there.
- Everything else may be set in a `.env`, keys included.

A line a `.env` may not set is ignored, with one warning per process naming it.
What it does not do: read the file for settings (pydantic-settings does) or decide precedence.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

log = logging.getLogger("researchflow.settings")

# Settings that name where traffic or results go -> why a .env may not set them.
DESTINATIONS = {
    "store": "it names a DuckLake catalog, which would be handed PGPASSWORD",
    "db_path": "written ducklake:..., it names a DuckLake catalog, which would be handed "
               "PGPASSWORD",
    "lake_data_path": "it names where a DuckLake writes its files",
    "searxng_url": "every search built from a topic is sent there, past the fetcher's guard",
    "dask_address": "a Dask scheduler is sent pickled work and results (code)",
    "fetch_allow_hosts": "it opens private addresses to the fetcher",
}
ENVIRONMENT_ONLY = tuple(DESTINATIONS)
# Settings whose names sound like a destination but name this machine's own folders, or a count.
LOCAL = ("cache_dir", "corpus_dir", "max_fetches_per_host")
# Lines of a .env that other readers act on (Prefect reads .env itself; proxies are listed so
# that a planted one is named, though nothing here loads them from a .env).
FOREIGN = re.compile(r"^(PREFECT_\w*(URL|HOST|ADDRESS|DATABASE|CONNECTION)\w*|"
                     r"(HTTPS?|ALL|FTP|NO)_PROXY)$", re.I)
_LAKE = "ducklake:"
KEYED_URLS = {f"{p}_base_url": f"{p}_api_key" for p in ("openai", "anthropic", "gemini", "serpapi")}
_warned: set[str] = set()


class DotEnvRules(PydanticBaseSettingsSource):
    """The `.env` source with what it may not set removed (see module docstring)."""

    def __init__(self, settings_cls: type[BaseSettings], dotenv: PydanticBaseSettingsSource,
                 *above: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._dotenv = dotenv
        self._above = above  # the sources that win over .env: explicit arguments, environment
        self._names = _field_names(settings_cls)
        self._shown = _shown_names(settings_cls)

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ does the work, as the wrapped source does

    def __call__(self) -> dict[str, Any]:
        found = self._dotenv()
        if not found:
            return found
        above = {self._names.get(k.lower(), k) for source in self._above for k in source()}
        kept = {}
        for key, value in found.items():
            field = self._names.get(key.lower(), key)
            if field in DESTINATIONS and (field != "db_path" or names_lake(value)):
                _warn(self._shown[field], DESTINATIONS[field])
            elif field in KEYED_URLS and KEYED_URLS[field] in above:
                _warn(self._shown[field], f"the {KEYED_URLS[field].split('_')[0]} key comes "
                      "from the environment, and a key from the environment is only sent where "
                      "the environment (or the command line) says")
            else:
                kept[key] = value
        return kept


def names_lake(value: Any) -> bool:
    """Whether a db_path names a lake: only as written, "ducklake:..." (`./ducklake:x` is a
    file, as with --db)."""
    return isinstance(value, str) and value.strip().startswith(_LAKE)


def foreign_destinations(folder: Path | None = None) -> list[str]:
    """What the working directory (folder) sets that other programs would send traffic by
    (`FOREIGN`), each as "NAME in ./FILE", unless the environment sets it itself: lines of
    `.env`, and Prefect's settings in `prefect.toml` or `pyproject.toml` [tool.prefect], which
    Prefect reads from the working directory too."""
    folder = folder or Path.cwd()
    found = [f"{name} in ./.env" for name in _dotenv_names(folder / ".env")
             if FOREIGN.match(name) and name not in os.environ]
    for file, table in (("prefect.toml", ()), ("pyproject.toml", ("tool", "prefect"))):
        for path in _toml_keys(folder / file, table):
            name = "PREFECT_" + "_".join(path).upper()
            if FOREIGN.match(name) and name not in os.environ:
                found.append(f"{'.'.join(path)} in ./{file}")
    return list(dict.fromkeys(found))


def _dotenv_names(path: Path) -> list[str]:
    try:
        text = path.read_text(errors="replace") if path.is_file() else ""
    except OSError:
        return []
    return [line.strip().removeprefix("export ").split("=", 1)[0].strip()
            for line in text.splitlines() if "=" in line]


def _toml_keys(path: Path, table: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Every key path under `table` of a TOML file (none when it is missing or unreadable)."""
    import tomllib

    try:
        data: Any = tomllib.loads(path.read_text(errors="replace")) if path.is_file() else {}
    except (OSError, ValueError):
        return []
    for name in table:
        data = data.get(name, {}) if isinstance(data, dict) else {}
    keys: list[tuple[str, ...]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), data)]
    while stack:
        prefix, node = stack.pop()
        for key, value in (node.items() if isinstance(node, dict) else ()):
            (stack.append((prefix + (str(key),), value)) if isinstance(value, dict)
             else keys.append(prefix + (str(key),)))
    return keys


def _field_names(settings_cls: type[BaseSettings]) -> dict[str, str]:
    """Every name a source may use for a field (lower case) -> the field's name."""
    prefix = settings_cls.model_config.get("env_prefix", "").lower()
    names: dict[str, str] = {}
    for name, info in settings_cls.model_fields.items():
        names[name] = names[prefix + name] = name
        for choice in getattr(info.validation_alias, "choices", ()) or ():
            if isinstance(choice, str):
                names[choice.lower()] = name
    return names


def _shown_names(settings_cls: type[BaseSettings]) -> dict[str, str]:
    """field -> the variable names a user writes for it, e.g. "OPENAI_BASE_URL"."""
    prefix = settings_cls.model_config.get("env_prefix", "")
    shown = {}
    for name, info in settings_cls.model_fields.items():
        choices = [c for c in getattr(info.validation_alias, "choices", ()) or ()
                   if isinstance(c, str)]
        shown[name] = " / ".join(sorted(choices, key=len)) or f"{prefix}{name}".upper()
    return shown


def _warn(shown: str, why: str) -> None:
    if shown not in _warned:
        _warned.add(shown)
        log.warning("ignoring %s in .env: %s; export it instead", shown, why)
