"""Provider exceptions, translated once into the typed signals of `core.signals.taxonomy`.

`classify(exc)` maps an exception from the openai, anthropic or google-genai SDKs (or their
transport) to one of these; `translate_errors()` is the context manager each provider wraps its
SDK call in, so the original exception is always kept as `__cause__`. `classify_payload()` is the
same decision for a bare (status, body, headers) triple. Reading the bodies themselves (every
string, nested JSON included; overflow numbers; retry hints; masking keys) is
`core.signals.bodies`, re-exported here.
A model name never decides the category; it is only carried on the signal.

Decision order, structured fields before text: transport errors; auth / permission / not found /
billing / unrecoverable quota by status, type, code or reason (a 403 only when the body does not
read as an overflow: Together answers 403 to input + max_tokens > context); overflow (numbers in
the text or in llama.cpp's n_ctx / n_prompt_tokens, an overflow code, 413), whatever the status
(vLLM-based servers send some as 500); output caps (Fatal: max_tokens larger than the model can
ever produce, or alone as large as the window); overflow phrases; rate limits and overload; then
the status code alone. Every `ContextOverflow` from here carries its `side`: "output" when the
numbers show the prompt fits and only prompt + max_tokens does not (lower max_tokens), "input"
when the prompt itself is too long, None when the message cannot tell.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from core.signals.bodies import (AUTH_TEXT, BILLING_TEXT, BodyFacts, OVERLOAD_TEXT,
                                        OverflowNumbers, RATE_TEXT, STRING_TOO_LONG, ZERO_QUOTA,
                                        clip, looks_like_overflow, mask_secrets, output_cap,
                                        overflow_numbers, parse_duration, read_body, retry_after,
                                        retry_after_from_headers, side_from_text,
                                        string_length_numbers, tokens_per_minute)
from core.signals.taxonomy import (BudgetExceeded, ContextOverflow, Fatal, RateLimited, Signal,
                                Transient)
from core.signals.sdk_errors import (is_bad_url, is_timeout, is_transport, provider_of,
                                      sdk_of)

__all__ = ["Signal", "ContextOverflow", "RateLimited", "Transient", "Fatal", "BudgetExceeded",
           "classify",
           "classify_payload", "translate_errors",
           # the body readers, public for tests and for callers that hold a raw reply
           "BodyFacts", "read_body", "OverflowNumbers", "overflow_numbers", "output_cap",
           "parse_duration", "retry_after", "retry_after_from_headers", "tokens_per_minute",
           "mask_secrets"]


_KEY_VARS = {"openai": "OPENAI_API_KEY (and OPENAI_BASE_URL for compatible servers)",
             "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY (or GOOGLE_API_KEY)"}

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
    sdk = sdk_of(exc)
    provider = provider_of(exc, sdk)
    if is_bad_url(exc):
        return Fatal(mask_secrets(str(exc)), provider=provider, model=model, reason="config",
                     hint="check the base URL setting (e.g. OPENAI_BASE_URL): it is not a valid URL")
    if is_transport(exc):
        what = "timed out" if is_timeout(exc) else "could not connect or the connection dropped"
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
    message = f"{where}: {clip(mask_secrets(f.message or text or '(empty body)'))}"
    codes = f.codes
    nums = overflow_numbers(text, f.numbers)
    if nums is not None and nums.kind == "tpm_per_request" and not nums.over:
        nums = None  # "Limit 6000, Used 5034, Requested 1443": waiting helps; a rate limit
    overflow_code = bool(codes & {"context_length_exceeded", "request_too_large",
                                  "exceed_context_size_error", "context_window_exceeded",
                                  "model_max_prompt_tokens_exceeded"} or status == 413)
    overflowish = nums is not None or overflow_code or looks_like_overflow(text)

    def fatal(reason: str, hint: str | None = None, **kw: Any) -> Fatal:
        return Fatal(message, reason=reason, hint=hint, **kw, **base)

    # 1. Structured answers that no shrinking or waiting can change.
    if (status == 401 or codes & {"authentication_error", "unauthenticated", "invalid_api_key",
                                  "api_key_invalid", "invalid_authentication"}
            or AUTH_TEXT.search(low)):
        return fatal("auth", _key_hint(sdk))
    if codes & {"insufficient_quota", "billing_error", "billing_hard_limit_reached",
                "budget_exceeded"} or status == 402 or BILLING_TEXT.search(low):
        return fatal("billing", "add credits or raise the spend/budget limit for this key "
                                "on the provider's billing page, or use another key")
    if status == 429 and (ZERO_QUOTA.search(low) or "0" in f.quota_values):
        return fatal("quota", "this key has no quota for this model (limit 0): enable billing "
                              "or choose another model in RESEARCHFLOW_MODEL")
    if (status == 403 and not overflowish) or codes & {"permission_error", "permission_denied",
                                                       "unsupported_country_region_territory"}:
        return fatal("permission", "the key lacks access to this model, region or project; "
                                   "check the provider console or choose another model")
    if (status == 404 or codes & {"not_found_error", "model_not_found", "deploymentnotfound",
                                  "not_found"}):
        hint = ("pull the model first: `ollama pull <model>`" if "try pulling" in low else
                "check the model name in RESEARCHFLOW_MODEL (for Azure: the deployment name and "
                "api version; for compatible servers: OPENAI_BASE_URL)")
        return fatal("not_found", hint)

    # 2. Overflow: the numbers the provider stated, or an overflow code. (A 403 or a 500 that
    #    says so is an overflow too: Together answers 403, vLLM-based servers 500.)
    if nums is not None and nums.output is not None and nums.limit is not None \
            and nums.output >= nums.limit and not (nums.input or 0) >= nums.limit:
        # max_tokens alone fills the window while the prompt fits: an output-side overflow,
        # recovered at once by a lower max_tokens (not a cap on what the model can write).
        hint = (f"max_tokens ({nums.output}) alone fills the {nums.limit}-token window; lower "
                "max_tokens" + (f" to under {nums.limit - nums.input}" if nums.input else ""))
        requested = nums.requested or ((nums.input + nums.output) if nums.input else None)
        return ContextOverflow(message, limit=nums.limit, requested=requested,
                               input_tokens=nums.input, output_tokens=nums.output,
                               limit_kind="context_window_incl_output", side="output",
                               infer_side=False, hint=hint, **base)
    string_too_long = "string_above_max_length" in codes or STRING_TOO_LONG.search(text)
    if string_too_long and not nums:
        if any(p.startswith(("messages", "input", "contents", "prompt", "system")) for p in f.params):
            nums = string_length_numbers(text)
            overflow_code = True
        else:
            return fatal("bad_request", "a field other than the messages is too long "
                                        "(e.g. a tool name); fix the request")
    if nums is not None or overflow_code:
        return _overflow(message, nums, base, status, text)

    # 3. Texts that look like overflow but are configuration or money.
    cap = output_cap(text, f.params)
    if cap is not None and not (cap == 0 and side_from_text(text) == "input"):
        hint = "lower RESEARCHFLOW_MAX_OUTPUT_TOKENS"
        return fatal("output_cap", f"{hint} to at most {cap}" if cap else hint,
                     limit_kind="output_tokens", max_output=cap or None)
    if overflowish:
        return _overflow(message, None, base, status, text)

    # 4. Rate limits and overload: wait and retry.
    wait = retry_after(headers, text, f.retry_delay, status)
    overloaded = status == 529 or codes & {"overloaded_error", "model_capacity_exhausted"} \
        or OVERLOAD_TEXT.search(low)
    limited = status == 429 or codes & {"rate_limit_error", "resource_exhausted",
                                        "rate_limit_exceeded", "throttling_error",
                                        "too_many_requests", "tokens", "requests"}
    if limited or (overloaded and (status is None or status >= 500 or status == 429)) \
            or ((status is None or status >= 500) and RATE_TEXT.search(low)):
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
              status: int | None, text: str) -> ContextOverflow:
    kind = nums.kind if nums else ("request_bytes" if status == 413 else None)
    side = _side(nums, text, kind)
    hint = "shrink the context and call again (waiting does not help)"
    if nums and nums.limit and nums.requested:
        hint = f"needs {nums.requested} of {nums.limit} tokens; shrink the context and call again"
    if side == "output" and nums and nums.limit and nums.input is not None:
        hint = (f"the prompt ({nums.input} tokens) fits the {nums.limit}-token window; lower "
                f"max_tokens to under {nums.limit - nums.input} or shrink the context")
    if kind == "tpm_per_request":
        hint += f"; or raise the per-minute token budget above {nums.requested if nums else '?'}"
    return ContextOverflow(message, limit=nums.limit if nums else None,
                           requested=nums.requested if nums else None,
                           input_tokens=nums.input if nums else None,
                           output_tokens=nums.output if nums else None,
                           limit_kind=kind or "context_window", side=side, infer_side=False,
                           hint=hint, **base)


def _side(nums: OverflowNumbers | None, text: str, kind: str | None) -> str | None:
    """Numbers first; when they cannot decide, None if they carry a prompt count, a bound or a
    bare total (the split is unknown), else what the wording names."""
    if nums is not None:
        if nums.side is not None:
            return nums.side
        if nums.input is not None or nums.lower_bound or kind == "tpm_per_request" \
                or (kind == "context_window_incl_output" and nums.requested is not None):
            return None
    if kind in ("request_bytes", "message_chars"):
        return "input"
    return side_from_text(text)
