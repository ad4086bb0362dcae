"""Error families beyond the fixture sample, constructed from the providers' documented formats.

Each entry is (family, HTTP status, body, headers, expected category, expected signal fields),
served by the contract test in test_provider_errors.py through the real SDK clients.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

# -- families beyond the sample, constructed from the providers' documented error formats ------
# (OpenAI error codes guide, Anthropic errors page, Gemini troubleshooting / google.rpc, and the
# messages OpenRouter, DeepSeek, Ollama, vLLM, llama.cpp, TGI and LiteLLM are known to send.)


def C(cid: str, family: str, status: int, body: Any, category: str, headers: dict[str, str] | None
      = None, **expect: Any) -> Any:
    return pytest.param(family, status, body, headers or {}, category, expect, id=cid)

OA_CTX = ("This model's maximum context length is 65536 tokens. However, you requested 70000 tokens "
          "(62000 in the messages, 8000 in the completion). Please reduce the length of the messages "
          "or completion.")
CONSTRUCTED = [
    # openai and OpenAI-compatible servers
    C("openai-401-key-masked", "openai", 401, {"error": {
        "message": "Incorrect API key provided: sk-abc123***************wxyz. You can find your API "
                   "key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}},
      "Fatal", reason="auth"),
    C("openai-429-retry-after-ms", "openai", 429, {"error": {
        "message": "Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): "
                   "Limit 500, Used 500, Requested 1. Please try again in 120ms.",
        "type": "requests", "param": None, "code": "rate_limit_exceeded"}},
      "RateLimited", {"retry-after-ms": "1500", "retry-after": "2"}, retry_after=1.5),
    C("openai-429-header-beats-text", "openai", 429, {"error": {
        "message": "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
                   "Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}},
      "RateLimited", {"retry-after": "3"}, retry_after=3, tokens_per_minute=30000),
    C("openai-429-reset-headers", "openai", 429, {"error": {
        "message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}},
      "RateLimited", {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
                      "x-ratelimit-remaining-tokens": "100", "x-ratelimit-reset-tokens": "1s"},
      retry_after=360),
    C("openai-max-tokens-too-large", "openai", 400, {"error": {
        "message": "max_tokens is too large: 100000. This model supports at most 16384 completion "
                   "tokens, whereas you provided 100000.",
        "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"}},
      "Fatal", reason="output_cap", limit_kind="output_tokens", max_output=16384),
    C("openai-string-above-max-length-messages", "openai", 400, {"error": {
        "message": "Invalid 'messages[1].content': string too long. Expected a string with maximum "
                   "length 10485760, but got a string with length 12000000 instead.",
        "type": "invalid_request_error", "param": "messages[1].content",
        "code": "string_above_max_length"}},
      "ContextOverflow", limit=10485760, requested=12000000, limit_kind="message_chars"),
    C("openai-responses-context-window", "openai", 400, {"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your input "
                   "and try again.", "type": "invalid_request_error", "param": "input",
        "code": "context_length_exceeded"}},
      "ContextOverflow", limit=None, requested=None),
    C("openai-billing-hard-limit", "openai", 400, {"error": {
        "message": "Billing hard limit has been reached", "type": "invalid_request_error",
        "param": None, "code": "billing_hard_limit_reached"}}, "Fatal", reason="billing"),
    C("openai-403-region", "openai", 403, {"error": {
        "message": "Country, region, or territory not supported", "type": "request_forbidden",
        "param": None, "code": "unsupported_country_region_territory"}}, "Fatal", reason="permission"),
    C("openai-overflow-as-500", "openai", 500, {"object": "error", "message": OA_CTX,
                                                "type": "InternalServerError", "code": 500},
      "ContextOverflow", limit=65536, requested=70000, input_tokens=62000, output_tokens=8000),
    C("openai-502-html", "openai", 502, "<html><body><h1>502 Bad Gateway</h1></body></html>",
      "Transient"),
    C("azure-429-retry-after-header", "openai", 429, {"error": {"code": "429", "message":
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 "
        "have exceeded call rate limit of your current OpenAI S0 pricing tier."}},
      "RateLimited", {"retry-after": "9"}, retry_after=9),
    C("azure-content-filter", "openai", 400, {"error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content "
                   "management policy.", "type": None, "param": "prompt", "code": "content_filter"}},
      "Fatal", reason="bad_request"),
    C("openrouter-ctx-with-tools", "openai", 400, {"error": {
        "message": "This endpoint's maximum context length is 65536 tokens. However, you requested "
                   "about 92208 tokens (60833 of text input, 10042 of tool input, 21333 in the "
                   "output). Please reduce the length of either one, or use the \"middle-out\" "
                   "transform to compress your prompt automatically.", "code": 400}},
      "ContextOverflow", limit=65536, requested=92208, input_tokens=70875, output_tokens=21333,
      limit_kind="context_window_incl_output"),
    C("openrouter-output-fills-window", "openai", 400, {"error": {
        "message": "This endpoint's maximum context length is 131072 tokens. However, you requested "
                   "about 138956 tokens (7884 of text input, 131072 in the output). Please reduce "
                   "the length of either one.", "code": 400}},
      "ContextOverflow", limit=131072, input_tokens=7884, output_tokens=131072,
      limit_kind="context_window_incl_output"),
    C("openrouter-402-afford", "openai", 402, {"error": {
        "message": "This request requires more credits, or fewer max_tokens. You requested up to "
                   "4000 tokens, but can only afford 1234. To increase, visit "
                   "https://openrouter.ai/settings/credits and add more credits", "code": 402}},
      "Fatal", reason="billing"),
    C("openrouter-wrapped-provider-overflow", "openai", 400, {"error": {
        "message": "Provider returned error", "code": 400, "metadata": {
            "raw": json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                              "message": "prompt is too long: 210000 tokens > 200000 maximum"}}),
            "provider_name": "Anthropic"}}},
      "ContextOverflow", limit=200000, requested=210000),
    C("openrouter-429-reset-epoch-ms", "openai", 429, {"error": {
        "message": "Rate limit exceeded: free-models-per-min.", "code": 429}},
      "RateLimited", {"x-ratelimit-limit": "20", "x-ratelimit-remaining": "0",
                      "x-ratelimit-reset": "4102444800000"}),
    C("deepseek-402-balance", "openai", 402, {"error": {
        "message": "Insufficient Balance", "type": "unknown_error", "param": None,
        "code": "invalid_request_error"}}, "Fatal", reason="billing"),
    C("deepseek-ctx", "openai", 400, {"error": {"message": OA_CTX, "type": "invalid_request_error",
                                                "param": None, "code": "invalid_request_error"}},
      "ContextOverflow", limit=65536, requested=70000, limit_kind="context_window_incl_output"),
    C("ollama-404-pull", "openai", 404, {"error": {
        "message": "model \"llama3.2\" not found, try pulling it first", "type": "api_error",
        "param": None, "code": None}}, "Fatal", reason="not_found"),
    C("ollama-500-runner", "openai", 500, {"error": {
        "message": "llama runner process has terminated: signal: killed", "type": "api_error"}},
      "Transient"),
    C("vllm-max-tokens-vs-window", "openai", 400, {"object": "error", "message":
        "'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's maximum context "
        "length is 4096 tokens and your request has 2104 input tokens (2000 > 4096 - 2104).",
        "type": "BadRequestError", "param": None, "code": 400},
      "ContextOverflow", limit=4096, requested=4104, input_tokens=2104, output_tokens=2000),
    C("llamacpp-exceed-context", "openai", 400, {"error": {
        "code": 400, "message": "request (4476 tokens) exceeds the available context size (4096 "
        "tokens), try increasing it", "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476, "n_ctx": 4096}},
      "ContextOverflow", limit=4096, requested=4476),
    C("tgi-422-inputs-plus-new", "openai", 422, {"error": "Input validation error: `inputs` tokens "
        "+ `max_new_tokens` must be <= 8192. Given: 8000 `inputs` tokens and 1000 `max_new_tokens`",
        "error_type": "validation"},
      "ContextOverflow", limit=8192, requested=9000, input_tokens=8000, output_tokens=1000),
    C("groq-ctx-no-numbers", "openai", 400, {"error": {
        "message": "Please reduce the length of the messages or completion.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
      "ContextOverflow", limit=None),
    C("litellm-budget", "openai", 400, {"error": {
        "message": "Budget has been exceeded! Current cost: 10.52, Max budget: 10.0",
        "type": "budget_exceeded", "param": None, "code": "400"}}, "Fatal", reason="billing"),
    # anthropic
    C("anthropic-401", "anthropic", 401, {"type": "error", "error": {
        "type": "authentication_error", "message": "invalid x-api-key"}}, "Fatal", reason="auth"),
    C("anthropic-403", "anthropic", 403, {"type": "error", "error": {
        "type": "permission_error", "message": "Your API key does not have permission to use the "
        "specified resource."}}, "Fatal", reason="permission"),
    C("anthropic-404-model", "anthropic", 404, {"type": "error", "error": {
        "type": "not_found_error", "message": "model: claude-3-5-sonnet-2024"}},
      "Fatal", reason="not_found"),
    C("anthropic-413", "anthropic", 413, {"type": "error", "error": {
        "type": "request_too_large", "message": "Request exceeds the maximum allowed number of "
        "bytes."}}, "ContextOverflow", limit=None, limit_kind="request_bytes"),
    C("anthropic-429-retry-after", "anthropic", 429, {"type": "error", "error": {
        "type": "rate_limit_error", "message": "This request would exceed the rate limit for your "
        "organization of 40,000 input tokens per minute. Please reduce the prompt length or the "
        "maximum tokens requested, or try again later."}},
      "RateLimited", {"retry-after": "17"}, retry_after=17, tokens_per_minute=40000),
    C("anthropic-credit-balance", "anthropic", 400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "Your credit balance is too low to access the "
        "Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}},
      "Fatal", reason="billing"),
    C("anthropic-billing-error", "anthropic", 400, {"type": "error", "error": {
        "type": "billing_error", "message": "This organization has been disabled."}},
      "Fatal", reason="billing"),
    C("anthropic-504-timeout", "anthropic", 504, {"type": "error", "error": {
        "type": "timeout_error", "message": "Request timed out"}}, "Transient"),
    # gemini (google.rpc statuses)
    C("gemini-400-payload-bytes", "genai", 400, {"error": {
        "code": 400, "message": "Request payload size exceeds the limit: 20971520 bytes.",
        "status": "INVALID_ARGUMENT"}},
      "ContextOverflow", limit=20971520, limit_kind="request_bytes"),
    C("gemini-400-counted", "genai", 400, {"error": {
        "code": 400, "message": "The input token count (1500000) exceeds the maximum number of "
        "tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}},
      "ContextOverflow", limit=1048576, requested=1500000, limit_kind="input_window"),
    C("gemini-400-bad-json", "genai", 400, {"error": {
        "code": 400, "message": "Invalid JSON payload received. Unknown name \"foo\": Cannot find "
        "field.", "status": "INVALID_ARGUMENT"}}, "Fatal", reason="bad_request"),
    C("gemini-400-max-output-range", "genai", 400, {"error": {
        "code": 400, "message": "Unable to submit request because it has a maxOutputTokens value "
        "of 100000 but the supported range is from 1 (inclusive) to 65537 (exclusive). Update the "
        "value and try again.", "status": "INVALID_ARGUMENT"}},
      "Fatal", reason="output_cap", max_output=65536),
    C("gemini-429-retryinfo", "genai", 429, [{"error": {
        "code": 429, "message": "You exceeded your current quota, please check your plan and "
        "billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/"
        "generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry "
        "in 34.5s.", "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_"
                                "requests", "quotaId": "GenerateRequestsPerMinutePerProjectPer"
                                "Model-FreeTier", "quotaValue": "10"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34s"}]}}],
      "RateLimited", retry_after=34),
    C("gemini-429-limit-zero", "genai", 429, {"error": {
        "code": 429, "message": "You exceeded your current quota, please check your plan and "
        "billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/"
        "generate_content_free_tier_input_token_count, limit: 0, model: gemini-2.5-pro",
        "status": "RESOURCE_EXHAUSTED"}}, "Fatal", reason="quota"),
    C("gemini-403-leaked-key", "genai", 403, {"error": {
        "code": 403, "message": "Your API key was reported as leaked. Please use another API key.",
        "status": "PERMISSION_DENIED"}}, "Fatal", reason="permission"),
    C("gemini-404-model", "genai", 404, {"error": {
        "code": 404, "message": "models/gemini-9-ultra is not found for API version v1beta, or is "
        "not supported for generateContent.", "status": "NOT_FOUND"}},
      "Fatal", reason="not_found"),
    C("gemini-503-overloaded", "genai", 503, {"error": {
        "code": 503, "message": "The model is overloaded. Please try again later.",
        "status": "UNAVAILABLE"}}, "RateLimited", reason="overloaded"),
    C("gemini-500-internal", "genai", 500, {"error": {
        "code": 500, "message": "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting", "status": "INTERNAL"}},
      "Transient"),
    C("gemini-504-deadline", "genai", 504, {"error": {
        "code": 504, "message": "Deadline Exceeded", "status": "DEADLINE_EXCEEDED"}}, "Transient"),
    C("gemini-400-free-tier-country", "genai", 400, {"error": {
        "code": 400, "message": "Gemini API free tier is not available in your country. Please "
        "enable billing on your project in Google AI Studio.", "status": "FAILED_PRECONDITION"}},
      "Fatal"),
]
