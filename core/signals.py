"""Provider exceptions, translated once into four typed signals.

    Signal
    ├── ContextOverflow   the request is bigger than the model (or one minute's budget) allows:
    │                     shrink the context and call again, never sleep
    ├── RateLimited       wait (retry_after when the provider said it) and retry
    ├── Transient         a passing fault: retry with backoff
    └── Fatal             configuration, auth, billing, bad request: fail now, say what to fix

`classify(exc)` maps an exception from the openai, anthropic or google-genai SDKs (or their
transport) to one of these; `translate_errors()` is the context manager each provider wraps its
SDK call in, so the original exception is always kept as `__cause__`. `classify_payload()` is the
same decision for a bare (status, body, headers) triple. The second half of the module reads
error bodies: every string in them (nested JSON included), the numbers an overflow states, retry
hints from headers, google RetryInfo and text, and masks anything that looks like an API key.
A model name never decides the category; it is only carried on the signal.

Decision order, structured fields before text: transport errors; auth / permission / not found /
billing / unrecoverable quota by status, type, code or reason; overflow (numbers in the text, or
an overflow code, 413); output caps and billing texts that merely look like overflow (Fatal);
overflow phrases; rate limits and overload; then the status code alone.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Iterator, Mapping

__all__ = ["Signal", "ContextOverflow", "RateLimited", "Transient", "Fatal", "classify",
           "classify_payload", "translate_errors",
           # the body readers, public for tests and for callers that hold a raw reply
           "BodyFacts", "read_body", "OverflowNumbers", "overflow_numbers", "output_cap",
           "parse_duration", "retry_after", "retry_after_from_headers", "tokens_per_minute",
           "mask_secrets"]


class Signal(Exception):
    """Base of the typed signals. `hint` says what the user can do about it."""

    def __init__(self, message: str, *, provider: str | None = None, model: str | None = None,
                 status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.model = model
        self.status = status
        self.hint = hint

    def __str__(self) -> str:
        text = self.message
        if self.hint:
            text = f"{text} ({self.hint})"
        return text


class ContextOverflow(Signal):
    """`limit_kind`: context_window | context_window_incl_output | input_window |
    tpm_per_request (one request above the per-minute token budget) | message_chars |
    request_bytes. `requested` includes the output tokens when the provider counted them."""

    def __init__(self, message: str, *, limit: int | None = None, requested: int | None = None,
                 input_tokens: int | None = None, output_tokens: int | None = None,
                 limit_kind: str | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.limit = limit
        self.requested = requested
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.limit_kind = limit_kind


class RateLimited(Signal):
    """`reason`: rate_limit | overloaded | quota. `tokens_per_minute` is the budget when stated."""

    def __init__(self, message: str, *, retry_after: float | None = None,
                 reason: str | None = None, tokens_per_minute: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after
        self.reason = reason
        self.tokens_per_minute = tokens_per_minute


class Transient(Signal):
    pass


class Fatal(Signal):
    """`reason`: auth | permission | not_found | billing | quota | output_cap | bad_request |
    config | internal. For output caps `limit_kind` is "output_tokens" and `max_output` the cap."""

    def __init__(self, message: str, *, reason: str | None = None, limit_kind: str | None = None,
                 max_output: int | None = None, **kw) -> None:
        super().__init__(message, **kw)
        self.reason = reason
        self.limit_kind = limit_kind
        self.max_output = max_output


_KEY_VARS = {"openai": "OPENAI_API_KEY (and OPENAI_BASE_URL for compatible servers)",
             "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY (or GOOGLE_API_KEY)"}
_HOSTS = {"groq.com": "groq", "openrouter.ai": "openrouter", "deepseek.com": "deepseek",
          "mistral.ai": "mistral", "openai.azure.com": "azure-openai", "together": "together",
          ":11434": "ollama", "api.openai.com": "openai"}


def classify(exc: BaseException, model: str | None = None) -> Signal:
    """Map any SDK or transport exception to a typed signal (see module docstring). Never raises."""
    if isinstance(exc, Signal):
        return exc
    try:
        return _classify(exc, model)
    except Exception as bug:  # noqa: BLE001 - a classifier that raises would hide the real error
        return Fatal(mask_secrets(f"{type(exc).__name__}: {exc}"), model=model, reason="internal",
                     hint=f"error classification failed ({type(bug).__name__}); see __cause__")


def classify_payload(status: int | None, body: Any, *, headers: Mapping[str, str] | None = None,
                     sdk: str | None = None, model: str | None = None,
                     provider: str | None = None) -> Signal:
    """The decision for a provider reply: HTTP status (None inside a stream), body, headers."""
    facts = read_body(body)
    return _decide(facts, status, {k.lower(): v for k, v in (headers or {}).items()},
                   sdk=sdk, provider=provider or sdk, model=model)


@contextmanager
def translate_errors(model: str | None = None) -> Iterator[None]:
    """Run an SDK call; re-raise whatever it throws as a typed signal `from` the original."""
    try:
        yield
    except Signal:
        raise
    except Exception as exc:  # noqa: BLE001 - every SDK error is mapped here, once
        raise classify(exc, model=model) from exc


# -- exceptions -> facts ----------------------------------------------------------------------

def _classify(exc: BaseException, model: str | None) -> Signal:
    sdk = _sdk_of(exc)
    provider = _provider_of(exc, sdk)
    if _is_bad_url(exc):
        return Fatal(mask_secrets(str(exc)), provider=provider, model=model, reason="config",
                     hint="check the base URL setting (e.g. OPENAI_BASE_URL): it is not a valid URL")
    if _is_transport(exc):
        what = "timed out" if _is_timeout(exc) else "could not connect or the connection dropped"
        return Transient(f"{provider or 'provider'} request {what}: {mask_secrets(str(exc))}",
                         provider=provider, model=model, hint="retry with backoff")
    if sdk is None:  # our own code or an unknown library: nothing to retry
        return Fatal(mask_secrets(f"{type(exc).__name__}: {exc}"), provider=provider, model=model,
                     reason="internal")
    name = type(exc).__name__
    if name == "APIResponseValidationError":
        return Fatal(f"{provider} reply did not match the SDK schema: {mask_secrets(str(exc))}",
                     provider=provider, model=model, reason="bad_request",
                     hint="the server is not speaking this provider's API; check the base URL")
    if name in ("LengthFinishReasonError", "ContentFilterFinishReasonError"):
        return Fatal(mask_secrets(str(exc)), provider=provider, model=model, reason="bad_request",
                     hint="raise max_tokens" if name.startswith("Length") else None)
    if not hasattr(exc, "code" if sdk == "gemini" else "body"):  # raised before any request
        return Fatal(mask_secrets(f"{type(exc).__name__}: {exc}"), provider=provider, model=model,
                     reason="config", hint=_key_hint(sdk) if "credential" in name.lower() else None)
    if sdk == "gemini":  # genai's .details is the whole JSON reply
        status, body = getattr(exc, "code", None), getattr(exc, "details", None)
        if body is None:
            body = {"message": getattr(exc, "message", None), "status": getattr(exc, "status", None)}
    else:  # openai's .body is the inner "error" object when there is one; anthropic's the reply
        status, body = getattr(exc, "status_code", None), getattr(exc, "body", None)
        extra = {k: getattr(exc, k, None) for k in ("type", "code", "param")}
        body = [body, {k: v for k, v in extra.items() if isinstance(v, str)},
                getattr(exc, "message", None) if body is None else None]
    if status == 200:  # an error event inside a 200 stream: the status tells nothing
        status = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    facts = read_body(body)
    return _decide(facts, status, {str(k).lower(): str(v) for k, v in dict(headers).items()},
                   sdk=sdk, provider=provider, model=model)


def _sdk_of(exc: BaseException) -> str | None:
    root = type(exc).__module__.split(".")[0]
    if root in ("openai", "anthropic"):
        return root
    if type(exc).__module__.startswith("google.genai"):
        return "gemini"
    return None


def _provider_of(exc: BaseException, sdk: str | None) -> str | None:
    request = getattr(exc, "request", None)
    if request is None:
        try:
            request = getattr(getattr(exc, "response", None), "request", None)
        except Exception:  # noqa: BLE001 - httpx raises when a response has no request
            request = None
    url = str(getattr(request, "url", "") or "")
    for needle, name in _HOSTS.items():
        if needle in url:
            return name
    return sdk


def _classes(*dotted: str) -> tuple[type, ...]:
    """Exception classes from modules already imported (an exception of a module never
    imported cannot exist, so nothing heavy is imported here)."""
    found = []
    for path in dotted:
        mod, _, attr = path.rpartition(".")
        cls = getattr(sys.modules.get(mod), attr, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = 0
    while exc is not None and seen < 6:
        yield exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1


def _is_transport(exc: BaseException) -> bool:
    transport = _classes("openai.APIConnectionError", "anthropic.APIConnectionError",
                         "httpx.TransportError", "httpx2.TransportError", "httpcore.NetworkError",
                         "httpcore.TimeoutException", "requests.exceptions.ConnectionError",
                         "requests.exceptions.Timeout", "aiohttp.ClientConnectionError",
                         "google.auth.exceptions.TransportError")
    return isinstance(exc, transport + (TimeoutError, ConnectionError))


def _is_timeout(exc: BaseException) -> bool:
    timeouts = _classes("openai.APITimeoutError", "anthropic.APITimeoutError",
                        "httpx.TimeoutException", "httpx2.TimeoutException",
                        "requests.exceptions.Timeout")
    return any(isinstance(e, timeouts + (TimeoutError,)) for e in _chain(exc))


def _is_bad_url(exc: BaseException) -> bool:
    bad = _classes("httpx.UnsupportedProtocol", "httpx2.UnsupportedProtocol", "httpx.InvalidURL",
                   "httpx2.InvalidURL")
    return bool(bad) and any(isinstance(e, bad) for e in _chain(exc))


# -- facts -> signal --------------------------------------------------------------------------

def _key_hint(sdk: str | None) -> str:
    var = _KEY_VARS.get(sdk or "", "the provider's API key variable")
    return f"check {var} (or its RESEARCHFLOW_ form): the key is missing, wrong or revoked"


def _decide(f: BodyFacts, status: int | None, headers: Mapping[str, str], *,
            sdk: str | None, provider: str | None, model: str | None) -> Signal:
    text = f.text
    low = text.lower()
    base: dict[str, Any] = {"provider": provider, "model": model, "status": status}
    where = f"{provider or 'provider'}" + (f" HTTP {status}" if status else " stream error")
    message = f"{where}: {mask_secrets(clip(f.message or text or '(empty body)'))}"
    codes = f.codes

    def fatal(reason: str, hint: str | None = None, **kw: Any) -> Fatal:
        return Fatal(message, reason=reason, hint=hint, **kw, **base)

    # 1. Structured answers that no shrinking or waiting can change.
    if (status == 401 or codes & {"authentication_error", "unauthenticated", "invalid_api_key",
                                  "api_key_invalid", "invalid_authentication"}
            or _AUTH_TEXT.search(low)):
        return fatal("auth", _key_hint(sdk))
    if codes & {"insufficient_quota", "billing_error", "billing_hard_limit_reached",
                "budget_exceeded"} or status == 402 or _BILLING_TEXT.search(low):
        return fatal("billing", "add credits or raise the spend/budget limit for this key "
                                "on the provider's billing page, or use another key")
    if status == 429 and (_ZERO_QUOTA.search(low) or "0" in f.quota_values):
        return fatal("quota", "this key has no quota for this model (limit 0): enable billing "
                              "or choose another model in RESEARCHFLOW_MODEL")
    if status == 403 or codes & {"permission_error", "permission_denied",
                                 "unsupported_country_region_territory"}:
        return fatal("permission", "the key lacks access to this model, region or project; "
                                   "check the provider console or choose another model")
    if (status == 404 or codes & {"not_found_error", "model_not_found", "deploymentnotfound",
                                  "not_found"}):
        hint = ("pull the model first: `ollama pull <model>`" if "try pulling" in low else
                "check the model name in RESEARCHFLOW_MODEL (for Azure: the deployment name and "
                "api version; for compatible servers: OPENAI_BASE_URL)")
        return fatal("not_found", hint)

    # 2. Overflow: the numbers the provider stated, or an overflow code.
    nums = overflow_numbers(text, f.numbers)
    if nums is not None and nums.kind == "tpm_per_request" and not nums.over:
        nums = None  # "Limit 6000, Used 5034, Requested 1443": waiting helps; a rate limit
    if nums is not None and nums.output is not None and nums.limit is not None \
            and nums.output >= nums.limit:
        return fatal("output_cap", f"max_tokens ({nums.output}) alone fills the {nums.limit}-token "
                     "window: lower RESEARCHFLOW_MAX_OUTPUT_TOKENS", limit_kind="output_tokens",
                     max_output=None)
    overflow_code = (codes & {"context_length_exceeded", "request_too_large",
                              "exceed_context_size_error", "context_window_exceeded"}
                     or status == 413)
    string_too_long = "string_above_max_length" in codes or _STRING_TOO_LONG.search(text)
    if string_too_long and not nums:
        if any(p.startswith(("messages", "input", "contents", "prompt", "system")) for p in f.params):
            nums = string_length_numbers(text)
            overflow_code = True
        else:
            return fatal("bad_request", "a field other than the messages is too long "
                                        "(e.g. a tool name); fix the request")
    if nums is not None or overflow_code:
        return _overflow(message, nums, base, status)

    # 3. Texts that look like overflow but are configuration or money.
    cap = output_cap(text, f.params)
    if cap is not None:
        hint = "lower RESEARCHFLOW_MAX_OUTPUT_TOKENS"
        return fatal("output_cap", f"{hint} to at most {cap}" if cap else hint,
                     limit_kind="output_tokens", max_output=cap or None)
    if _OVERFLOW_TEXT.search(low):
        return _overflow(message, None, base, status)

    # 4. Rate limits and overload: wait and retry.
    wait = retry_after(headers, text, f.retry_delay, status)
    overloaded = status == 529 or codes & {"overloaded_error", "model_capacity_exhausted"} \
        or _OVERLOAD_TEXT.search(low)
    limited = status == 429 or codes & {"rate_limit_error", "resource_exhausted",
                                        "rate_limit_exceeded", "throttling_error",
                                        "too_many_requests", "tokens", "requests"}
    if limited or (overloaded and (status is None or status >= 500 or status == 429)) \
            or ((status is None or status >= 500) and _RATE_TEXT.search(low)):
        reason = ("overloaded" if overloaded else
                  "quota" if re.search(r"\bquota\b", low) else "rate_limit")
        hint = f"retry after {wait:g}s" if wait is not None else "retry with backoff"
        if "perday" in " ".join(f.quota_ids).lower() or "per day" in low:
            hint += "; this is a daily quota, it may not recover within this run"
        return RateLimited(message, retry_after=wait, reason=reason, hint=hint,
                           tokens_per_minute=tokens_per_minute(text), **base)

    # 5. The status alone.
    if status in (408, 409, 425, 499) or codes & {"timeout_error", "deadline_exceeded",
                                                  "unavailable", "internal", "api_error",
                                                  "server_error", "cancelled"}:
        return Transient(message, hint="retry with backoff", **base)
    if status is not None and status >= 500:
        return Transient(message, hint="retry with backoff", **base)
    if status is None and not codes & {"invalid_request_error", "invalid_argument",
                                       "failed_precondition", "badrequesterror"}:
        return Transient(message, hint="the stream broke off; retry with backoff", **base)
    if "failed_precondition" in codes:
        return fatal("permission", "the API is not available for this project or location "
                                   "(billing or region); check the provider console")
    return fatal("bad_request", "the provider rejected the request; fix the request or settings")


def _overflow(message: str, nums: OverflowNumbers | None, base: dict[str, Any],
              status: int | None) -> ContextOverflow:
    kind = nums.kind if nums else ("request_bytes" if status == 413 else None)
    hint = "shrink the context and call again (waiting does not help)"
    if nums and nums.limit and nums.requested:
        hint = f"needs {nums.requested} of {nums.limit} tokens; shrink the context and call again"
    if kind == "tpm_per_request":
        hint += f"; or raise the per-minute token budget above {nums.requested if nums else '?'}"
    return ContextOverflow(message, limit=nums.limit if nums else None,
                           requested=nums.requested if nums else None,
                           input_tokens=nums.input if nums else None,
                           output_tokens=nums.output if nums else None,
                           limit_kind=kind or "context_window", hint=hint, **base)


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


_STRING_TOO_LONG = re.compile(rf"expected a string with maximum length (?P<lim>{_NUM}), but got "
                             rf"a string with length (?P<req>{_NUM})", re.I)


def string_length_numbers(text: str) -> OverflowNumbers:
    m = _STRING_TOO_LONG.search(text)
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


_AUTH_TEXT = re.compile(r"api key not valid|incorrect api key|invalid api key|invalid x-api-key|"
                       r"api key expired|no api key|missing api key|invalid authentication|"
                       r"authentication (?:failed|required)")
_BILLING_TEXT = re.compile(r"credit balance is too low|insufficient (?:credits|balance|funds)|"
                          r"requires more credits|budget has been exceeded|budget exceeded|"
                          r"key limit exceeded|spend(?:ing)? limit|billing hard limit|"
                          r"payment required|purchase (?:more )?credits")
_ZERO_QUOTA = re.compile(r"\blimit: 0\b")
_OVERFLOW_TEXT = re.compile(r"context_length_exceeded|context length exceeded|maximum context length|"
                           r"context ?window(?: size)? (?:exceeded|is exceeded)|exceeds? the context "
                           r"(?:window|length|size)|prompt is too long|input is too long|"
                           r"too many input tokens|reduce the length of the messages|"
                           r"contextwindowexceedederror|exceeds the available context size")
_OVERLOAD_TEXT = re.compile(r"overloaded|capacity|temporarily unavailable due to high demand")
_RATE_TEXT = re.compile(r"rate.?limit|too many requests|throttl|quota")


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
