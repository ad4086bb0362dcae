"""Reading provider error bodies: every string in them, the numbers an overflow states, retry
hints, and masking of API keys (by value and by pattern: core.secrets).

Pure text and data handling, no SDK imports. `core.signals` decides categories from what this
module reads; tests and callers holding a raw reply use these readers directly. What an overflow
or output-cap message says (numbers, side, cap) is `core.signals.overflow_numbers`, re-exported here.
"""

from __future__ import annotations

import ast
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Mapping

from core.signals.overflow_numbers import (OVERFLOW_TEXT, STRING_TOO_LONG, OverflowNumbers,
                                         looks_like_overflow, output_cap, overflow_numbers,
                                         side_from_text, string_length_numbers)
from core.secrets import mask

__all__ = ["BodyFacts", "read_body", "parse_duration", "retry_after", "retry_after_from_headers",
           "tokens_per_minute", "mask_secrets", "clip", "AUTH_TEXT", "BILLING_TEXT", "ZERO_QUOTA",
           "OVERLOAD_TEXT", "RATE_TEXT",
           # re-exported from core.signals.overflow_numbers
           "OVERFLOW_TEXT", "STRING_TOO_LONG", "OverflowNumbers", "looks_like_overflow",
           "output_cap", "overflow_numbers", "side_from_text", "string_length_numbers"]

# -- reading error bodies ---------------------------------------------------------------------
# Every string in the body counts (bodies nest: Gemini's `[{"error": ...}]`, litellm's
# `b'{...}'` inside a message, OpenRouter's `metadata.raw`), not `str(exc)`.

_CODE_KEYS = {"type", "code", "status", "reason", "error_code"}
_FALLBACK = "error doing the fallback"  # litellm appends failed fallbacks; the first error decides
_NUM = r"\d+(?:,\d{3})*"


@dataclass
class BodyFacts:
    message: str | None = None
    texts: list[str] = field(default_factory=list)
    codes: set[str] = field(default_factory=set)  # type/code/status/reason values, lower case
    params: list[str] = field(default_factory=list)
    numbers: dict[str, int] = field(default_factory=dict)  # llama.cpp n_ctx / n_prompt_tokens
    retry_delay: float | None = None  # google.rpc.RetryInfo
    quota_values: list[str] = field(default_factory=list)
    quota_ids: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.texts)


def read_body(body: Any) -> BodyFacts:
    facts = BodyFacts()
    _walk(body, facts, 0)
    return facts


def _walk(node: Any, f: BodyFacts, depth: int) -> None:
    if depth > 8 or node is None or isinstance(node, bool):
        return
    if isinstance(node, bytes):
        node = node.decode("utf-8", "replace")
    if isinstance(node, str):
        _walk_text(node, f, depth)
    elif isinstance(node, Mapping):
        for key in sorted(node, key=lambda k: k != "message"):  # the message first
            value, k = node[key], str(key).lower()
            if k in _CODE_KEYS and isinstance(value, (str, int)) and not isinstance(value, bool):
                f.codes.add(str(value).lower())
            elif k == "param" and isinstance(value, str):
                f.params.append(value.lower())
            elif k == "retrydelay" and isinstance(value, str):
                f.retry_delay = parse_duration(value)
            elif k == "quotavalue":
                f.quota_values.append(str(value))
            elif k == "quotaid":
                f.quota_ids.append(str(value))
            elif k in ("n_ctx", "n_prompt_tokens") and isinstance(value, int):
                f.numbers[k] = value
            if k == "message" and isinstance(value, str) and f.message is None:
                f.message = value.split("\n" + _FALLBACK)[0]
            _walk(value, f, depth + 1)
    elif isinstance(node, (list, tuple)):
        for item in node:
            _walk(item, f, depth + 1)


def _walk_text(text: str, f: BodyFacts, depth: int) -> None:
    text = text[:50_000]
    cut = text.lower().find(_FALLBACK)
    if cut >= 0:
        text = text[:cut]
    f.texts.append(text)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:  # JSON (or a Python repr) embedded in a string
        inner = text[start:end + 1]
        for parse in (json.loads, ast.literal_eval):
            try:
                parsed = parse(inner)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            _walk(parsed, f, depth + 1)
            break
    elif text.lstrip().startswith("[") and text.rstrip().endswith("]"):
        try:
            _walk(json.loads(text), f, depth + 1)
        except ValueError:
            pass


AUTH_TEXT = re.compile(r"api key not valid|incorrect api key|invalid api key|invalid x-api-key|"
                       r"api key expired|no api key|missing api key|invalid authentication|"
                       r"authentication (?:failed|required)")
BILLING_TEXT = re.compile(r"credit balance is too low|insufficient (?:credits|balance|funds)|"
                          r"requires more credits|budget has been exceeded|budget exceeded|"
                          r"key limit exceeded|spend(?:ing)? limit|billing hard limit|"
                          r"payment required|purchase (?:more )?credits")
ZERO_QUOTA = re.compile(r"\blimit: 0\b")
OVERLOAD_TEXT = re.compile(r"overloaded|capacity|temporarily unavailable due to high demand")
RATE_TEXT = re.compile(r"rate.?limit|too many requests|throttl|quota")


# -- retry hints --------------------------------------------------------------------------------

_UNITS = [("milliseconds", 0.001), ("millisecond", 0.001), ("ms", 0.001), ("hours", 3600),
          ("hour", 3600), ("h", 3600), ("minutes", 60), ("minute", 60), ("mins", 60), ("min", 60),
          ("m", 60), ("seconds", 1), ("second", 1), ("secs", 1), ("sec", 1), ("s", 1)]
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(?:(" + "|".join(u for u, _ in _UNITS) + r")(?![a-z]))?",
                       re.I)
_RETRY_TEXT = re.compile(r"(?:try again|retry) (?:in|after) (?:about )?((?:\d+(?:\.\d+)?\s*"
                         r"(?:[a-z]+)?\s*)+)", re.I)


def parse_duration(text: str) -> float | None:
    """"4.77s", "6m0s", "20ms", "9 seconds", "12" (seconds) -> seconds."""
    total, found = 0.0, False
    for number, unit in _DURATION.findall(text.strip()):
        scale = dict(_UNITS).get(unit.lower(), 1.0) if unit else 1.0
        total, found = total + float(number) * scale, True
    return round(total, 3) if found else None


def retry_after_from_headers(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """retry-after-ms, then retry-after (seconds or an HTTP date); None when neither is usable."""
    h = {k.lower(): v for k, v in headers.items()}
    now = time.time() if now is None else now
    if (ms := h.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    if (value := h.get("retry-after")) is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                return max(0.0, parsedate_to_datetime(value).timestamp() - now)
            except (TypeError, ValueError, IndexError):
                pass
    return None


def _reset_headers(h: Mapping[str, str], now: float) -> float | None:
    """x-ratelimit-reset-{requests,tokens} ("6m0s"), x-ratelimit-reset (epoch or seconds),
    anthropic-ratelimit-*-reset (RFC 3339): the longest of the exhausted limits."""
    waits: list[float] = []
    for key, value in h.items():
        if not key.endswith("reset") and "-reset-" not in key:
            continue
        remaining = h.get(key.replace("reset", "remaining"))
        if remaining not in (None, "0"):
            continue
        wait: float | None = None
        if re.fullmatch(r"\d+(?:\.\d+)?", value.strip()):
            n = float(value)
            wait = n / 1000 - now if n > 1e11 else n - now if n > 1e9 else n
        elif "T" in value:
            try:
                wait = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() - now
            except ValueError:
                wait = None
        else:
            wait = parse_duration(value)
        if wait is not None:
            waits.append(max(0.0, wait))
    return round(max(waits), 3) if waits else None


def retry_after(headers: Mapping[str, str], text: str, retry_delay: float | None = None,
                status: int | None = None, now: float | None = None) -> float | None:
    """Seconds to wait: retry-after headers win, then google RetryInfo, then the text
    ("try again in 4.77s", "retry after 9 seconds"), then x-ratelimit reset headers."""
    now = time.time() if now is None else now
    found = retry_after_from_headers(headers, now)
    if found is None:
        found = retry_delay
    if found is None and (m := _RETRY_TEXT.search(text)):
        found = parse_duration(m.group(1))
    if found is None and status == 429:
        found = _reset_headers({k.lower(): v for k, v in headers.items()}, now)
    return found


_TPM = re.compile(rf"(?:tokens per min(?:ute)?|\(tpm\))[^:]*: limit (?P<a>{_NUM})|of (?P<b>{_NUM}) "
                  rf"(?:input |output )?tokens per minute", re.I)


def tokens_per_minute(text: str) -> int | None:
    m = _TPM.search(text)
    found = m.group("a") or m.group("b") if m else None
    return int(found.replace(",", "")) if found else None


# -- secrets -------------------------------------------------------------------------------------

def mask_secrets(text: str) -> str:
    """Replace every key this process loaded (by value) and anything that looks like one (by
    pattern) with ***: core.secrets.mask. Mask before clipping, so no key is cut in two."""
    return mask(text)


def clip(text: str, limit: int = 700) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
