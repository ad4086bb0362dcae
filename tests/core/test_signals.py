"""Pure logic of core.signals: reading bodies, numbers, retry hints, masking, decision order.
(The same decisions through the real SDKs are in tests/contract/test_provider_errors.py.)"""

from __future__ import annotations

import json
from email.utils import formatdate

import pytest

from core.signals import (ContextOverflow, Fatal, RateLimited, Signal, Transient, classify,
                          classify_payload, mask_secrets, output_cap, overflow_numbers,
                          parse_duration, read_body, retry_after, retry_after_from_headers,
                          translate_errors)


@pytest.mark.parametrize("text,expected", [
    ("prompt is too long: 208732 tokens > 200000 maximum", (200000, 208732, None, None)),
    ("input length and `max_tokens` exceed context limit: 184915 + 20000 > 204648",
     (204648, 204915, 184915, 20000)),
    ("This model's maximum context length is 4097 tokens, however you requested 4927 tokens (3927 "
     "in your prompt; 1000 for the completion).", (4097, 4927, 3927, 1000)),
    ("This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 "
     "tokens.", (8192, 8227, None, None)),
    ("Request too large for gpt-4o on tokens per min (TPM): Limit 30,000, Requested 30,601.",
     (30000, 30601, None, None)),
    ("The input token count exceeds the maximum number of tokens allowed (1048576).",
     (1048576, None, None, None)),
])
def test_overflow_numbers(text: str, expected: tuple) -> None:
    nums = overflow_numbers(text)
    assert nums is not None
    assert (nums.limit, nums.requested, nums.input, nums.output) == expected


def test_tpm_numbers_that_fit_are_not_an_overflow() -> None:
    nums = overflow_numbers("Rate limit reached ... on tokens per minute (TPM): Limit 6000, Used "
                            "5034, Requested 1443. Please try again in 4.77s.")
    assert nums is not None and nums.kind == "tpm_per_request" and not nums.over


@pytest.mark.parametrize("text", ["Could not process image", "below 20 MB in size", "",
                                  "Rate limit reached for requests"])
def test_no_overflow_numbers(text: str) -> None:
    assert overflow_numbers(text) is None


@pytest.mark.parametrize("text,cap", [
    ("max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for x", 4096),
    ("max_tokens is too large: 100000. This model supports at most 16384 completion tokens", 16384),
    ("max_tokens is too large: 100000.", 0),
    ("Could not process image", None),
])
def test_output_cap(text: str, cap: int | None) -> None:
    assert output_cap(text, []) == cap


@pytest.mark.parametrize("text,seconds", [
    ("4.77s", 4.77), ("6m0s", 360), ("20ms", 0.02), ("9 seconds", 9), ("12", 12),
    ("1h2m3s", 3723), ("2 minutes", 120), ("nonsense", None),
])
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_retry_after_headers() -> None:
    now = 1_700_000_000.0
    assert retry_after_from_headers({"Retry-After-Ms": "1500", "retry-after": "9"}, now) == 1.5
    assert retry_after_from_headers({"retry-after": "9"}, now) == 9
    assert retry_after_from_headers({"retry-after": formatdate(now + 30, usegmt=True)}, now) == \
        pytest.approx(30, abs=1)
    assert retry_after_from_headers({"retry-after": "soon"}, now) is None
    assert retry_after_from_headers({}, now) is None


def test_retry_after_precedence() -> None:
    now = 1_700_000_000.0
    text = "Please try again in 4.77s."
    assert retry_after({"retry-after": "3"}, text, 12.0, 429, now) == 3  # header wins
    assert retry_after({}, text, 12.0, 429, now) == 12  # then google RetryInfo
    assert retry_after({}, text, None, 429, now) == 4.77  # then the text
    assert retry_after({}, "Please retry after 9 seconds.", None, 429, now) == 9
    resets = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30s",
              "x-ratelimit-remaining-tokens": "500", "x-ratelimit-reset-tokens": "5s"}
    assert retry_after(resets, "", None, 429, now) == 90  # only the exhausted limit counts
    assert retry_after({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int((now + 20) * 1000))},
                       "", None, 429, now) == pytest.approx(20)
    assert retry_after({"anthropic-ratelimit-tokens-remaining": "0",
                        "anthropic-ratelimit-tokens-reset": "2023-11-14T22:13:40Z"},
                       "", None, 429, now) == pytest.approx(20)


@pytest.mark.parametrize("secret", [
    "sk-abc123def456ghi789", "sk-proj-AbCdEf1234567890", "sk-ant-api03-abcdefghijkl",
    "AIzaSyA1234567890abcdefghijk", "gsk_abcdefghijklmnop", "sk-or-v1-0123456789abcdef",
])
def test_mask_secrets(secret: str) -> None:
    masked = mask_secrets(f"Incorrect API key provided: {secret}. Try again.")
    assert secret not in masked and secret[6:] not in masked
    assert "Try again." in masked


def test_mask_secrets_in_urls_and_headers() -> None:
    text = "GET https://x.googleapis.com/v1beta/models?key=AIzaSECRETSECRETSECRET&alt=sse " \
           "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload"
    masked = mask_secrets(text)
    assert "SECRETSECRET" not in masked and "eyJhbGci" not in masked
    assert "alt=sse" in masked


def test_read_body_walks_nested_json_lists_and_reprs() -> None:
    body = [{"error": {"code": 400, "message": "outer", "status": "INVALID_ARGUMENT", "details": [
        {"reason": "API_KEY_INVALID"}, {"retryDelay": "12s"}]}}]
    facts = read_body(body)
    assert facts.message == "outer"
    assert {"400", "invalid_argument", "api_key_invalid"} <= facts.codes
    assert facts.retry_delay == 12
    wrapped = "AzureException - Error code: 429 - {'error': {'code': '429', 'message': 'inner'}}"
    assert "429" in read_body({"message": wrapped}).codes
    raw = "litellm: AnthropicException - b'" + json.dumps(
        {"type": "error", "error": {"type": "request_too_large", "message": "m"}}) + "'"
    assert "request_too_large" in read_body(raw).codes


def test_read_body_ignores_failed_fallbacks() -> None:
    text = ("litellm.BadRequestError: bad tool blocks\nError doing the fallback: "
            "prompt is too long: 209303 tokens > 200000 maximum")
    facts = read_body({"message": text})
    assert "prompt is too long" not in facts.text
    assert isinstance(classify_payload(400, {"message": text}), Fatal)


@pytest.mark.parametrize("status,body,category", [
    (400, {"error": {"message": "API key not valid.", "status": "INVALID_ARGUMENT"}}, Fatal),
    (429, {"error": {"message": "Resource has been exhausted (e.g. check quota).",
                     "status": "RESOURCE_EXHAUSTED"}}, RateLimited),
    (429, {"message": "x", "type": "insufficient_quota", "code": "insufficient_quota"}, Fatal),
    (413, {"message": "Request Entity Too Large"}, ContextOverflow),
    (500, {"message": "This model's maximum context length is 4096 tokens. However, your messages "
                      "resulted in 5000 tokens."}, ContextOverflow),
    (503, {"message": "Service tier capacity exceeded for this model."}, RateLimited),
    (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     RateLimited),
    (502, "<html>Bad Gateway</html>", Transient),
    (418, None, Fatal),
    (None, {"message": "stream cut", "type": "server_error"}, Transient),
    (None, {"message": "prompt is too long: 5 tokens > 4 maximum"}, ContextOverflow),
])
def test_decision_table(status: int | None, body: object, category: type) -> None:
    assert type(classify_payload(status, body)) is category


def test_string_above_max_length_depends_on_param() -> None:
    msg = "string too long. Expected a string with maximum length 64, but got a string with length 74"
    tool = classify_payload(400, {"message": msg, "code": "string_above_max_length",
                                  "param": "tools[0].function.name"})
    content = classify_payload(400, {"message": msg, "code": "string_above_max_length",
                                     "param": "messages[3].content"})
    assert isinstance(tool, Fatal)
    assert isinstance(content, ContextOverflow) and (content.limit, content.requested) == (64, 74)
    assert content.limit_kind == "message_chars"


def test_vllm_negative_max_tokens_is_overflow_without_numbers() -> None:
    sig = classify_payload(400, {"object": "error", "message": "max_tokens must be at least 1, got "
                                 "-186.", "type": "BadRequestError", "code": 400})
    assert isinstance(sig, ContextOverflow) and sig.limit is None and sig.requested is None


def test_signals_carry_provider_model_status_and_hint() -> None:
    sig = classify_payload(401, {"error": {"type": "authentication_error", "message": "bad key"}},
                           sdk="anthropic", model="claude-sonnet-4-5")
    assert (sig.provider, sig.model, sig.status) == ("anthropic", "claude-sonnet-4-5", 401)
    assert "ANTHROPIC_API_KEY" in (sig.hint or "") and "ANTHROPIC_API_KEY" in str(sig)


def test_model_name_does_not_change_the_category() -> None:
    body = {"message": "prompt is too long: 208732 tokens > 200000 maximum"}
    for model in (None, "claude-sonnet-4-5", "gpt-4o", "unknown"):
        sig = classify_payload(400, body, model=model)
        assert isinstance(sig, ContextOverflow) and sig.limit == 200000


def test_classify_non_sdk_errors() -> None:
    assert isinstance(classify(ValueError("our bug")), Fatal)
    assert isinstance(classify(TimeoutError("slow")), Transient)
    assert isinstance(classify(ConnectionResetError("reset")), Transient)
    sig = Transient("already typed")
    assert classify(sig) is sig


def test_classify_never_raises() -> None:
    class Weird(Exception):
        __module__ = "openai._exceptions"  # looks like an SDK error, has none of its fields

        @property
        def body(self) -> object:
            raise RuntimeError("boom")

    assert isinstance(classify(Weird("x")), Fatal)


def test_translate_errors_keeps_the_cause() -> None:
    original = ConnectionError("dropped")
    with pytest.raises(Transient) as caught:
        with translate_errors(model="m"):
            raise original
    assert caught.value.__cause__ is original
    assert caught.value.model == "m"
    with pytest.raises(RateLimited):  # signals pass through untouched
        with translate_errors():
            raise RateLimited("wait", retry_after=1)


def test_str_includes_hint() -> None:
    assert str(Signal("boom", hint="do this")) == "boom (do this)"
    assert str(Signal("boom")) == "boom"


# -- wording never seen: numbers by role, the side, caps, odd statuses -----------------------------

@pytest.mark.parametrize("text,expected", [
    # (limit, requested, input, output)
    ("Input length 300000 exceeds the maximum allowed input length of 262144 tokens.",
     (262144, 300000, 300000, None)),
    ("Requested token count exceeds the model's maximum context length of 8192 tokens. You "
     "requested a total of 9000 tokens: 7000 tokens from the input messages and 2000 tokens for "
     "the completion.", (8192, 9000, 7000, 2000)),
    ("You passed 30000 input tokens and requested 4096 output tokens. However, the model's context "
     "length is only 32768 tokens, resulting in a maximum input length of 28672 tokens.",
     (32768, 34096, 30000, 4096)),
    ("The prompt is too long: 40177, model maximum context length: 32767", (32767, 40177, 40177, None)),
    ("Cannot truncate prompt with n_keep (14169) >= n_ctx (4096)", (4096, 14169, 14169, None)),
    ("Your request exceeded model token limit: 262144 (requested: 291351)",
     (262144, 291351, None, None)),
    ("max_tokens=40000 cannot be greater than max_model_len=32768.", (32768, None, None, 40000)),
])
def test_overflow_numbers_by_role(text: str, expected: tuple) -> None:
    nums = overflow_numbers(text)
    assert nums is not None
    assert (nums.limit, nums.requested, nums.input, nums.output) == expected


@pytest.mark.parametrize("text", [
    "Invalid 'messages': array too long. Expected an array with maximum length 2048, but got an "
    "array with length 2100 instead.",
    "This request would exceed the rate limit for your organization of 40,000 input tokens per "
    "minute.",
    "Request-URI Too Long",
])
def test_no_window_is_read_from_other_limits(text: str) -> None:
    assert overflow_numbers(text) is None
    assert not isinstance(classify_payload(400, {"message": text}), ContextOverflow)


@pytest.mark.parametrize("text,side", [
    # the prompt fits, prompt + max_tokens does not: lower max_tokens
    ("This model's maximum context length is 4097 tokens. However, you requested 4927 tokens (3927 "
     "in your prompt; 1000 for the completion).", "output"),
    ("`inputs` tokens + `max_new_tokens` must be <= 8192. Given: 6204 `inputs` tokens and 2047 "
     "`max_new_tokens`", "output"),
    # the prompt alone is too long
    ("`inputs` tokens + `max_new_tokens` must be <= 8192. Given: 9000 `inputs` tokens and 100 "
     "`max_new_tokens`", "input"),
    ("prompt is too long: 208732 tokens > 200000 maximum", "input"),
    ("the input length exceeds the context length", "input"),
    # cannot tell: a count cut off at the limit, a bare total, no subject
    ("This model's maximum context length is 32768 tokens. However, you requested 8192 output "
     "tokens and your prompt contains at least 24577 input tokens, for a total of at least 32769 "
     "tokens.", None),
    ("You passed 99073 input tokens and requested 32000 output tokens. However, the model's "
     "context length is only 131072 tokens.", None),
    ("Request token budget 140000 exceeds context limit 131072", None),
    ("Please reduce the length of the messages or completion.", None),
    ("Context size has been exceeded.", None),
])
def test_overflow_side(text: str, side: str | None) -> None:
    sig = classify_payload(400, {"message": text, "code": "context_length_exceeded"})
    assert isinstance(sig, ContextOverflow) and sig.side == side


def test_output_side_is_an_overflow_but_an_output_cap_is_fatal() -> None:
    side = classify_payload(400, {"message": "'max_tokens' or 'max_completion_tokens' is too large: "
                                  "2000. This model's maximum context length is 4096 tokens and "
                                  "your request has 2104 input tokens (2000 > 4096 - 2104)."})
    assert isinstance(side, ContextOverflow) and side.side == "output"
    assert (side.limit, side.input_tokens, side.output_tokens) == (4096, 2104, 2000)
    for text, cap in [("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", 8192),
                      ("`max_tokens` must be less than or equal to `16384`, the maximum value for "
                       "`max_tokens` is less than the `context_window` for this model", 16384)]:
        sig = classify_payload(400, {"message": text})
        assert isinstance(sig, Fatal) and sig.reason == "output_cap" and sig.max_output == cap, text
    # max_tokens alone fills the window: lowering it recovers the call, so it is an overflow.
    fills = classify_payload(400, {"message": "max_tokens=40000 cannot be greater than "
                                              "max_model_len=32768."})
    assert isinstance(fills, ContextOverflow) and fills.side == "output"
    assert (fills.limit, fills.output_tokens) == (32768, 40000)


def test_overflow_wins_over_403_and_500_when_the_body_says_so() -> None:
    together = {"error": {"message": "Input validation error: `inputs` tokens + `max_new_tokens` must "
                                     "be <= 8193. Given: 7981 `inputs` tokens and 512 `max_new_tokens`"}}
    assert isinstance(classify_payload(403, together), ContextOverflow)
    assert isinstance(classify_payload(403, {"error": {"message": "Forbidden"}}), Fatal)
    engine = {"error": {"message": "The decoder prompt (length 9000) is longer than the maximum model "
                                   "length of 8192.", "type": "InternalServerError", "code": 500}}
    sig = classify_payload(500, engine)
    assert isinstance(sig, ContextOverflow) and (sig.limit, sig.requested, sig.side) == \
        (8192, 9000, "input")
    assert isinstance(classify_payload(500, {"error": {"message": "CUDA error: out of memory"}}),
                      Transient)


def test_llamacpp_structured_counts_come_first() -> None:
    sig = classify_payload(400, {"error": {"code": 400, "message": "context exceeded",
                                           "type": "exceed_context_size_error",
                                           "n_prompt_tokens": 9000, "n_ctx": 8192}})
    assert isinstance(sig, ContextOverflow)
    assert (sig.limit, sig.requested, sig.input_tokens, sig.side) == (8192, 9000, 9000, "input")


def test_side_is_inferred_only_when_the_classifier_did_not_decide() -> None:
    built = ContextOverflow("x", limit=100, input_tokens=80, output_tokens=40)
    assert built.side == "output"
    decided = ContextOverflow("x", limit=100, input_tokens=80, output_tokens=40, infer_side=False)
    assert decided.side is None
