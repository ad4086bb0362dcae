"""Reading provider error bodies: every string in them, the numbers an overflow states, retry
hints, and masking of anything that looks like an API key.

Pure text and data handling, no SDK imports. `core.signals` decides categories from what this
module reads; tests and callers holding a raw reply use these readers directly.
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


@dataclass(frozen=True)
class OverflowNumbers:
    limit: int | None = None
    requested: int | None = None
    input: int | None = None
    output: int | None = None
    kind: str = "context_window"
    over: bool = True  # False: the numbers fit (a TPM message where waiting helps)


_FLAGS = re.I | re.S
# (pattern, limit_kind). Groups: lim, req, inp, out, parts (the "(x in the messages, y in the
# completion)" parenthesis), used.
_OVERFLOW_PATTERNS: list[tuple[re.Pattern[str], str]] = [(re.compile(p, _FLAGS), kind) for p, kind in [
    (rf"prompt is too long: (?P<req>{_NUM}) tokens > (?P<lim>{_NUM})", "context_window"),
    (rf"exceed context limit: (?P<inp>{_NUM}) \+ (?P<out>{_NUM}) > (?P<lim>{_NUM})",
     "context_window_incl_output"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens[.,]? however,? you requested "
     rf"(?:about )?(?P<req>{_NUM}) tokens(?: \((?P<parts>[^)]*)\))?", "context_window_incl_output"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens[.,]? however,? your messages resulted "
     rf"in (?P<req>{_NUM}) tokens", "context_window"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens and your request has (?P<inp>{_NUM}) "
     rf"input tokens \((?P<out>{_NUM}) >", "context_window_incl_output"),
    (rf"maximum context length is (?P<lim>{_NUM}) tokens. however, you requested (?P<out>{_NUM}) "
     rf"output tokens and your prompt contains at least (?P<inp>{_NUM}) input tokens",
     "context_window_incl_output"),
    (rf"input token count is (?P<req>{_NUM}) but (?:the )?model only supports up to (?P<lim>{_NUM})",
     "input_window"),
    (rf"input token count \((?P<req>{_NUM})\) exceeds the maximum number of tokens allowed "
     rf"\((?P<lim>{_NUM})\)", "input_window"),
    (rf"input token count exceeds the maximum number of tokens allowed \((?P<lim>{_NUM})\)",
     "input_window"),
    (rf"exceed the configured limit of (?P<lim>{_NUM}) tokens. your messages resulted in "
     rf"(?P<req>{_NUM}) tokens", "input_window"),
    (rf"prompt contains (?P<req>{_NUM}) tokens[^,]*, too large for model with (?P<lim>{_NUM}) "
     rf"maximum context length", "context_window"),
    (rf"input length \((?P<req>{_NUM}) tokens\) exceeds the maximum allowed length "
     rf"\((?P<lim>{_NUM}) tokens\)", "context_window"),
    (rf"request \((?P<req>{_NUM}) tokens\) exceeds the available context size "
     rf"\((?P<lim>{_NUM}) tokens\)", "context_window"),
    (rf"prompt \(total length (?P<req>{_NUM})\) is too long to fit into the model "
     rf"\(context length (?P<lim>{_NUM})\)", "context_window"),
    (rf"input prompt \((?P<req>{_NUM}) tokens\) is too long and exceeds limit of (?P<lim>{_NUM})",
     "context_window"),
    (rf"`inputs` tokens \+ `max_new_tokens` must be <= (?P<lim>{_NUM})\. given: (?P<inp>{_NUM}) "
     rf"`inputs` tokens and (?P<out>{_NUM}) `max_new_tokens`", "context_window_incl_output"),
    (rf"(?:tokens per min(?:ute)?|\(tpm\))[^:]*: limit (?P<lim>{_NUM}),\s*(?:used "
     rf"(?P<used>{_NUM}),\s*)?requested (?P<req>{_NUM})", "tpm_per_request"),
    (rf"request too large for .{{0,200}}?per min.{{0,40}}?limit:? (?P<lim>{_NUM})", "tpm_per_request"),
    (r"request too large for .{0,200}?(?:per min|\(tpm\))", "tpm_per_request"),
    (rf"request payload size exceeds the limit: (?P<lim>{_NUM}) bytes", "request_bytes"),
    (r"max_tokens must be at least 1, got -\d+", "context_window"),  # vLLM: no room left
]]
_OUTPUT_PART = re.compile(rf"(?P<n>{_NUM}) (?:in the completion|in the output|for the completion)", re.I)


def _int(value: str | None) -> int | None:
    return int(value.replace(",", "")) if value else None


def overflow_numbers(text: str, numbers: Mapping[str, int] | None = None) -> OverflowNumbers | None:
    """The limit and the request an overflow message states, or None when it is not one."""
    numbers = numbers or {}
    if "n_ctx" in numbers and "n_prompt_tokens" in numbers:  # llama.cpp says it structurally
        return OverflowNumbers(numbers["n_ctx"], numbers["n_prompt_tokens"])
    for pattern, kind in _OVERFLOW_PATTERNS:
        m = pattern.search(text)
        if not m:
            continue
        g = {k: _int(v) for k, v in m.groupdict().items() if k != "parts"}
        lim, req, inp, out = g.get("lim"), g.get("req"), g.get("inp"), g.get("out")
        parts = m.groupdict().get("parts")
        if parts is not None and (o := _OUTPUT_PART.search(parts)):
            out = _int(o.group("n"))
        elif kind == "context_window_incl_output" and inp is None and out is None:
            kind = "context_window"  # "you requested N tokens" without the split
        if req is None and inp is not None:
            req = inp + (out or 0)
        if inp is None and req is not None and out is not None:
            inp = req - out
        over = not (kind == "tpm_per_request" and lim is not None and req is not None and req <= lim)
        return OverflowNumbers(lim, req, inp, out, kind, over)
    return None


STRING_TOO_LONG = re.compile(rf"expected a string with maximum length (?P<lim>{_NUM}), but got "
                             rf"a string with length (?P<req>{_NUM})", re.I)


def string_length_numbers(text: str) -> OverflowNumbers:
    m = STRING_TOO_LONG.search(text)
    lim, req = (_int(m.group("lim")), _int(m.group("req"))) if m else (None, None)
    return OverflowNumbers(lim, req, kind="message_chars")


_CAP_PATTERNS = [
    (re.compile(rf"max_tokens: {_NUM} > (?P<cap>{_NUM}), which is the maximum allowed", re.I), 0),
    (re.compile(rf"supports at most (?P<cap>{_NUM}) completion tokens", re.I), 0),
    (re.compile(rf"maxoutputtokens value of {_NUM} but the supported range is from {_NUM} "
                rf"\(inclusive\) to (?P<cap>{_NUM}) \(exclusive\)", re.I), -1),
    (re.compile(rf"max_tokens.{{0,40}}(?:less than or equal to|<=|at most) (?P<cap>{_NUM})", re.I), 0),
    (re.compile(r"max_tokens is too large|max_tokens.{0,40}(?:greater|larger) than|"
                r"maximum (?:allowed )?(?:number of )?output tokens|"
                r"max_(?:output|completion)_tokens.{0,60}(?:too large|exceed|maximum)", re.I), 0),
]
_CAP_PARAMS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "generation_config")


def output_cap(text: str, params: list[str]) -> int | None:
    """The output-token cap a "max_tokens too large" error states: the cap, 0 when it says none,
    None when the text is not about the output cap."""
    for pattern, adjust in _CAP_PATTERNS:
        m = pattern.search(text)
        if m:
            cap = m.groupdict().get("cap")
            return _int(cap) + adjust if cap else 0
    if any(p.startswith(_CAP_PARAMS) for p in params) and re.search(r"too large|maximum|exceed", text, re.I):
        return 0
    return None


AUTH_TEXT = re.compile(r"api key not valid|incorrect api key|invalid api key|invalid x-api-key|"
                       r"api key expired|no api key|missing api key|invalid authentication|"
                       r"authentication (?:failed|required)")
BILLING_TEXT = re.compile(r"credit balance is too low|insufficient (?:credits|balance|funds)|"
                          r"requires more credits|budget has been exceeded|budget exceeded|"
                          r"key limit exceeded|spend(?:ing)? limit|billing hard limit|"
                          r"payment required|purchase (?:more )?credits")
ZERO_QUOTA = re.compile(r"\blimit: 0\b")
OVERFLOW_TEXT = re.compile(r"context_length_exceeded|context length exceeded|maximum context length|"
                           r"context ?window(?: size)? (?:exceeded|is exceeded)|exceeds? the context "
                           r"(?:window|length|size)|prompt is too long|input is too long|"
                           r"too many input tokens|reduce the length of the messages|"
                           r"contextwindowexceedederror|exceeds the available context size")
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
    return _int(m.group("a") or m.group("b")) if m else None


# -- secrets -------------------------------------------------------------------------------------

_SECRET = re.compile(
    r"(?P<pre>sk-(?:ant-(?:api\d+-)?|proj-|or-v1-|svcacct-)?|AIza|gsk_|xai-|hf_|pplx-|r8_|nvapi-)"
    r"[A-Za-z0-9_\-*]{4,}"
    r"|(?P<pre2>(?i:bearer|api key provided:|x-api-key:|x-goog-api-key:)\s*)[^\s,;\"']{6,}"
    r"|(?P<pre3>(?i:[?&](?:key|api_key|apikey)=))[^&\s\"']+")


def mask_secrets(text: str) -> str:
    """Replace anything that looks like an API key with its prefix and ***."""
    def repl(m: re.Match[str]) -> str:
        return (m.group("pre") or m.group("pre2") or m.group("pre3") or "") + "***"
    return _SECRET.sub(repl, text)


def clip(text: str, limit: int = 700) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
