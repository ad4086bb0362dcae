"""What a `.env` file in the working directory may set, read beside the real environment.

Anyone who can write to the folder a command starts in can plant a `.env` there: a cloned
repository, a shared checkout, an unpacked download. It is read with the user's own environment
beside it, so the rule is about where the user's credentials (and code) may be sent:

- A provider's base URL (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, `RESEARCHFLOW_GEMINI_BASE_URL`,
  `RESEARCHFLOW_SERPAPI_BASE_URL`, and the `RESEARCHFLOW_` forms of the first two) is taken from
  a `.env` only while that provider's key is not set in the environment or on the command line:
  the key then comes from the same `.env`, or there is none. A key from your environment only
  ever goes to an address your environment or command line names, or the provider's own.
- `RESEARCHFLOW_STORE` (a PostgreSQL catalog, which libpq would hand `PGPASSWORD`),
  `RESEARCHFLOW_DASK_ADDRESS` (a scheduler sends pickled work and results: code) and
  `RESEARCHFLOW_FETCH_ALLOW_HOSTS` (private addresses the fetcher may then read) come from the
  environment only.
- Everything else may be set in a `.env`, keys included.

A line a `.env` may not set is ignored, with one warning per process naming it.
What it does not do: read the file (pydantic-settings does) or decide precedence.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

log = logging.getLogger("researchflow.settings")

ENVIRONMENT_ONLY = ("store", "dask_address", "fetch_allow_hosts")
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
            if field in ENVIRONMENT_ONLY:
                _warn(self._shown[field], "it is read from the environment only")
            elif field in KEYED_URLS and KEYED_URLS[field] in above:
                _warn(self._shown[field], f"the {KEYED_URLS[field].split('_')[0]} key comes "
                      "from the environment, and a key from the environment is only sent where "
                      "the environment (or the command line) says")
            else:
                kept[key] = value
        return kept


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
