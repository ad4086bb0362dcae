"""The secret values this process knows, and masking them out of text that leaves it.

One registry per process. `core.settings.Settings` feeds it every key it loads (the providers'
and SerpAPI's, whichever variable or `.env` line they came from) and the few credentials other
libraries read from the environment (`PGPASSWORD`, `PREFECT_API_KEY`); anything else may call
`remember`. `mask(text)` then replaces each known value, its URL-encoded form and its base64
forms (alone, or inside a longer base64 text such as a Basic credential), with `***`
(after the value's well-known prefix, if it has one: `sk-proj-***`),
and after that anything that merely looks like a key (a known prefix such as `sk-`, a bearer
token, a `?key=` parameter, a URI's `user:password@`): a provider or proxy that echoes a key back, in whatever quoting,
is masked by what the key *is*, not by what it looks like.

Where masking happens: signals and failure lines are masked when they are made
(`core.signals`, `core.topics.failures`), the store masks what it writes into `topics.error` and
`ledger.error`, and once the registry holds a value every log record of the process is
masked as it is created (a log-record factory, so every logger and handler, Prefect's API log
handler included, only ever sees the masked text, its traceback too). `MaskedStream` does the same
for a terminal (the CLI wraps stdout and stderr in it).

Values shorter than `MIN_CHARS` are not masked by value: a key like "ollama" would blank out
every mention of the word. What it does not do: find secrets it was never told about, beyond the
key-like patterns.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import traceback
from typing import Any, TextIO
from urllib.parse import quote

MIN_CHARS = 8
MASK = "***"
# Credentials other libraries read from the environment on our behalf.
ENVIRONMENT_SECRETS = ("PGPASSWORD", "PREFECT_API_KEY")

_lock = threading.Lock()
_values: tuple[str, ...] = ()  # longest first, so a value inside another is masked whole
_shown: dict[str, str] = {}  # value -> what replaces it: its well-known prefix, if any, and ***
_installed = False

_PREFIXES = r"sk-(?:ant-(?:api\d+-)?|proj-|or-v1-|svcacct-)?|AIza|gsk_|xai-|hf_|pplx-|r8_|nvapi-"
_PREFIX = re.compile(_PREFIXES)
_PATTERN = re.compile(
    r"(?P<pre>" + _PREFIXES + r")"
    r"[A-Za-z0-9_\-*]{4,}"
    r"|(?P<pre2>(?i:bearer|api key provided:|x-api-key:|x-goog-api-key:)\s*)[^\s,;\"']{6,}"
    r"|(?P<pre3>(?i:[?&](?:key|api_key|apikey)=))[^&\s\"']+"
    r"|(?P<pre4>(?i:[a-z][\w+.-]*:/+[^/@\s:]*:))[^@\s/]+(?=@)")  # a URI's user:PASSWORD@
# A password written into a connection target (a DuckLake catalog): libpq's `password=...`, or
# a URI's userinfo (`postgresql://rf:PW@host`, also as Path() leaves it: `postgresql:/rf:PW@`).
TARGET_PASSWORD = re.compile(r"(?P<key>password\s*=\s*)(?P<pw>\S+)"
                             r"|(?P<uri>[a-z][\w+.-]*:/+[^/@\s:]*:)(?P<pw2>[^@\s]*)@", re.I)
_B64_MIN = 16  # a base64 fragment shorter than this would blank out ordinary text


def target_password(text: str) -> str | None:
    """The password a connection target carries, or None."""
    found = TARGET_PASSWORD.search(text)
    return None if found is None else (found.group("pw") or found.group("pw2") or None)


def mask_target(text: str) -> str:
    """A connection target as it may be shown: its password, in either form, as ***."""
    return TARGET_PASSWORD.sub(lambda m: (m.group("key") + MASK) if m.group("key") is not None
                               else m.group("uri") + MASK + "@", text)


def _encoded_forms(value: str) -> set[str]:
    """The value as a proxy may echo it: URL-encoded, and base64 (standard and URL-safe, alone
    or inside a longer base64 text such as `Basic base64(user:key)`: at each of the three
    alignments, the characters that only the value's bytes decide)."""
    forms = {quote(value, safe="")}
    raw = value.encode()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
        start = 0 if offset == 0 else 4  # the first group also holds the padding bytes
        end = len(encoded) - (len(encoded) % 4 or 4) if offset or len(raw) % 3 else len(encoded)
        for form in (encoded, encoded.replace("+", "-").replace("/", "_")):
            middle = form[start:end] if offset or len(raw) % 3 else form
            if offset == 0:
                forms.add(form)  # the value encoded alone, without its "=" padding
            if len(middle) >= _B64_MIN:
                forms.add(middle)
    return forms


def remember(value: str | None) -> None:
    """Mask `value` from now on (ignored when empty or shorter than MIN_CHARS)."""
    global _values
    if not value or len(value.strip()) < MIN_CHARS:
        return
    forms = {value.strip(), *_encoded_forms(value.strip())}
    with _lock:
        if forms <= set(_values):
            return
        for form in forms:
            prefix = _PREFIX.match(form)
            _shown[form] = (prefix.group(0) if prefix else "") + MASK
        _values = tuple(sorted(set(_values) | forms, key=len, reverse=True))
    _install_log_masking()


def known() -> int:
    """How many values are masked (forms included): for tests and diagnostics."""
    return len(_values)


def mask(text: str) -> str:
    """`text` with every remembered value, then anything that looks like a key, replaced."""
    if not text:
        return text
    for value in _values:
        if value in text:
            text = text.replace(value, _shown.get(value, MASK))
    return mask_target(_PATTERN.sub(_pattern_mask, text))  # and a target's password=...


def _pattern_mask(m: re.Match[str]) -> str:
    found = m.group(0)
    if found.endswith(MASK) and _PREFIX.fullmatch(found[:-len(MASK)]):
        return found  # masked already, by value: "sk-proj-***" stays as it is
    return (m.group("pre") or m.group("pre2") or m.group("pre3") or m.group("pre4") or ""
            ) + MASK


def _holds_secret(text: str) -> bool:
    return any(value in text for value in _values)


# -- logging ------------------------------------------------------------------------------------

def _install_log_masking() -> None:
    """Make every log record of this process carry masked text (once)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _values:
            mask_record(record)
        return record

    logging.setLogRecordFactory(factory)


def mask_record(record: logging.LogRecord) -> None:
    """Mask a record's message and, when it holds a secret, its traceback (formatted here, so
    a handler that formats it later only finds the masked text)."""
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string: logging reports it itself
        return
    if _holds_secret(message) or _PATTERN.search(message):
        record.msg, record.args = mask(message), ()
    if record.exc_info and record.exc_info[1] is not None:
        shown = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if _holds_secret(shown):
            record.exc_text, record.exc_info = mask(shown), None
    if record.stack_info and _holds_secret(record.stack_info):
        record.stack_info = mask(record.stack_info)


# -- terminals ----------------------------------------------------------------------------------

class MaskedStream:
    """A text stream that masks what is written to it; everything else is the wrapped stream's.

    A write is masked on its own: a key split across two writes would pass, which line-buffered
    writers (logging, rich) do not do.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mask_stream(stream: TextIO) -> TextIO:
    """`stream` wrapped in a MaskedStream (once)."""
    return stream if isinstance(stream, MaskedStream) else MaskedStream(stream)  # type: ignore[return-value]
