"""Keys from Prefect Secret blocks, read on the worker where a client is built.

A team running workers keeps its keys in Prefect, not in every worker's environment. So when a
Prefect server is in use, a run's context reads a key the environment lacks from the `Secret`
block named for it:

    researchflow-openai-api-key       OPENAI_API_KEY (the openai and openai-compatible models)
    researchflow-anthropic-api-key    ANTHROPIC_API_KEY
    researchflow-gemini-api-key       GEMINI_API_KEY / GOOGLE_API_KEY
    researchflow-serpapi-api-key      SERPAPI_API_KEY
    researchflow-lake-password        PGPASSWORD, for a DuckLake's PostgreSQL catalog

The environment (and the working directory's .env) wins when it sets the key. A value read from
a block is remembered by core.secrets at once, so it is masked by value like every key; it never
travels as a parameter, a RunConfig field, a result or an artifact: it lives in the client built
with it. A block that does not exist is said in a missing key's one-line hint, by name; a server
that cannot be reached is one warning, and the key is then missing.
"""

from __future__ import annotations

import logging
import os

from pydantic import SecretStr

from core import secrets
from core.settings import EnvironmentKeys

log = logging.getLogger("researchflow.keys")

PREFIX = "researchflow"
LAKE_PASSWORD = "PGPASSWORD"


def block_name(prefix: str) -> str:
    """The Secret block of a settings prefix's key (openai, anthropic, gemini, serpapi, lake)."""
    return f"{PREFIX}-lake-password" if prefix == "lake" else f"{PREFIX}-{prefix}-api-key"


def read_block(name: str) -> str | None:
    """The value of the Secret block `name`, remembered for masking; None when there is none."""
    from prefect.blocks.system import Secret

    try:
        block = Secret.load(name, _sync=True)
    except ValueError:  # Prefect's "Unable to find block document named ..."
        return None
    except Exception as exc:  # noqa: BLE001 - an unreachable server is a missing key, said once
        log.warning("could not read the Prefect Secret block %s: %s: %s", name,
                    type(exc).__name__, secrets.mask(str(exc)))
        return None
    value = block.get()
    if not isinstance(value, str) or not value:
        return None
    secrets.remember(value)
    return value


class SecretBlockKeys(EnvironmentKeys):
    """The environment's key, else the Secret block's (core.settings.EnvironmentKeys)."""

    def read(self, prefix: str) -> SecretStr | None:
        found = super().read(prefix)
        if found is not None:
            return found
        value = read_block(block_name(prefix))
        return SecretStr(value) if value else None

    def elsewhere(self, prefix: str) -> str:
        return f", or create the Prefect Secret block {block_name(prefix)}"


def lake_password(db_path: str) -> None:
    """For a DuckLake on PostgreSQL with no PGPASSWORD in the environment: the password from the
    block researchflow-lake-password, put where libpq reads it (this process's environment), or
    one line naming the block when there is none (libpq may still find ~/.pgpass)."""
    if not db_path.startswith("ducklake:postgres") or os.environ.get(LAKE_PASSWORD):
        return
    value = read_block(block_name("lake"))
    if value is None:
        log.info("no PGPASSWORD and no Prefect Secret block %s: the lake's catalog is reached "
                 "with libpq's other sources (~/.pgpass)", block_name("lake"))
        return
    os.environ[LAKE_PASSWORD] = value
