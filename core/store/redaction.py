"""What a stored settings snapshot may contain: secrets become set/unset or are dropped.

What it does: `public_settings` copies a settings dict for the `runs` table, replacing SecretStr
values by "set"/"unset" and dropping any value whose name sounds secret or whose text looks like
an API key.

What it does not do: decide what settings exist (`core.settings` does) or mask error messages.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import SecretStr

from core import secrets

_SENSITIVE_NAME = re.compile(r"(_api_key$|secret|password|(^|_)token($|_)|(^|_)key$)", re.I)
_KEY_LIKE_VALUE = re.compile(r"^(sk|pk|rk)-[A-Za-z0-9_\-]{6,}")


def public_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Defensive copy of settings for storage: secrets become set/unset or are dropped.

    Settings.public_dict() already does this; the store repeats it because a caller passing the
    wrong dict must not put a key on disk. "max_output_tokens" is public: only a whole "token"
    word in the name counts as sensitive.
    """
    out: dict[str, Any] = {}
    for name, value in settings.items():
        if isinstance(value, SecretStr):
            out[name] = "set" if value.get_secret_value() else "unset"
        elif isinstance(value, dict):
            out[name] = public_settings(value)
        elif _SENSITIVE_NAME.search(str(name)) and value not in ("set", "unset", None):
            continue
        elif isinstance(value, str) and _KEY_LIKE_VALUE.match(value):
            continue
        elif isinstance(value, str) and secrets.target_password(value) is not None:
            out[name] = secrets.mask_target(value)  # a connection string's password, any form
        else:
            out[name] = value
    return out
