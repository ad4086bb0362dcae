"""Context-window registry: longest-prefix matching, overrides, learning from overflows."""

from __future__ import annotations

import logging
import threading

import pytest

from core.overflow.windows import KNOWN, ContextLimits, normalize
from core.settings import Settings
from core.signals import ContextOverflow, Fatal, RateLimited


@pytest.mark.parametrize("model,window,max_output", [
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4o-mini", 128_000, 16_384),
    ("gpt-4o-mini-2024-07-18", 128_000, 16_384),
    ("gpt-4-0613", 8_192, 8_192),  # plain gpt-4 must not borrow gpt-4o's window
    ("gpt-4-turbo-2024-04-09", 128_000, 4_096),
    ("gpt-4.1-mini", 1_047_576, 32_768),
    ("gpt-5-mini", 400_000, 128_000),
    ("gpt-5-chat-latest", 128_000, 16_384),
    ("o1-mini", 128_000, 65_536),
    ("o1-2024-12-17", 200_000, 100_000),
    ("o3-mini", 200_000, 100_000),
    ("o4-mini", 200_000, 100_000),
    ("claude-sonnet-4-5-20250929", 200_000, 64_000),
    ("claude-opus-4-1-20250805", 200_000, 32_000),
    ("claude-opus-4-5", 200_000, 64_000),
    ("claude-haiku-4-5", 200_000, 64_000),
    ("claude-3-5-sonnet-20240620", 200_000, 8_192),
    ("claude-3-haiku-20240307", 200_000, 4_096),
    ("gemini-1.5-pro-002", 2_097_152, 8_192),
    ("gemini-2.0-flash-lite", 1_048_576, 8_192),
    ("gemini-2.5-flash-lite", 1_048_576, 65_536),
    ("gemini-3-pro-preview", 1_048_576, 65_536),
])
def test_table_by_longest_prefix(model: str, window: int, max_output: int) -> None:
    limits = ContextLimits()
    assert limits.window(model) == window
    assert limits.max_output(model) == max_output


def test_mini_never_resolves_through_its_parent() -> None:
    table = {"gpt-4o": KNOWN["gpt-4o"], "gpt-4o-mini": KNOWN["gpt-4o"].__class__(1_000, 10)}
    limits = ContextLimits(known=table)
    assert limits.window("gpt-4o-mini-2024-07-18") == 1_000
    assert limits.window("gpt-4o-2024-08-06") == 128_000


@pytest.mark.parametrize("raw,normal", [
    ("openai/gpt-4o", "gpt-4o"),
    ("openai:gpt-4o-mini", "gpt-4o-mini"),
    ("models/gemini-2.5-pro", "gemini-2.5-pro"),
    ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
    ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet-20240620-v1:0"),
    ("GPT-4o", "gpt-4o"),
    ("llama3:8b", "llama3:8b"),  # an Ollama tag, not a provider prefix
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),
])
def test_normalize(raw: str, normal: str) -> None:
    assert normalize(raw) == normal


def test_provider_prefixes_resolve() -> None:
    limits = ContextLimits()
    assert limits.window("openai/gpt-4o-mini") == 128_000
    assert limits.window("models/gemini-2.5-pro") == 1_048_576
    assert limits.window("anthropic/claude-sonnet-4") == 200_000
    assert limits.max_output("anthropic:claude-3.7-sonnet") == 64_000


def test_overrides_beat_the_table_by_longest_prefix() -> None:
    limits = ContextLimits({"gpt-4o": 64_000, "gpt-4o-mini": 32_000, "openai/gpt-4.1": 500_000,
                            "my-local": 8_192})
    assert limits.window("gpt-4o-2024-08-06") == 64_000
    assert limits.window("gpt-4o-mini") == 32_000
    assert ContextLimits({"gpt-4o": 64_000}).window("gpt-4o-mini") == 128_000  # table is longer
    assert limits.window("openai/gpt-4.1-nano") == 500_000
    assert limits.window("gpt-4.1-nano") == 1_047_576  # the override named the prefixed form only
    assert limits.window("my-local-model-q4") == 8_192
    assert limits.known("my-local-model-q4")


def test_unknown_model_gets_the_default_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    limits = ContextLimits(default=32_000)
    with caplog.at_level(logging.WARNING, logger="researchflow.limits"):
        assert limits.window("acme-brain-7") == 32_000
        assert limits.window("acme-brain-7") == 32_000
    lines = [r for r in caplog.records if r.name == "researchflow.limits"]
    assert len(lines) == 1
    text = lines[0].getMessage()
    assert "acme-brain-7" in text and "32000" in text
    assert "RESEARCHFLOW_CONTEXT_WINDOWS='{\"acme-brain-7\": 200000}'" in text
    assert not limits.known("acme-brain-7")
    assert limits.max_output("acme-brain-7") is None


def test_settings_feed_overrides_and_default(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("RESEARCHFLOW_DB_PATH", str(tmp_path / "store.duckdb"))
    monkeypatch.setenv("RESEARCHFLOW_CONTEXT_WINDOWS", '{"acme-": 50000}')
    monkeypatch.setenv("RESEARCHFLOW_DEFAULT_CONTEXT_WINDOW", "16000")
    from tasks import contexts
    from core.settings import run_config

    contexts.close()
    limits = contexts.context_for(run_config(Settings.load())).limits  # the path tasks take
    assert limits.window("acme-brain-7") == 50_000
    assert limits.window("other-model") == 16_000


def test_learned_window_wins_for_the_rest_of_the_run() -> None:
    limits = ContextLimits({"gpt-4o": 64_000})
    overflow = ContextOverflow("too long", limit=8_192, requested=9_000, limit_kind="context_window")
    limits.learn("gpt-4o", overflow)
    assert limits.window("gpt-4o") == 8_192  # beats the override
    assert limits.window("openai/gpt-4o") == 8_192  # the same model under its provider prefix
    assert limits.window("gpt-4o-mini") == 128_000  # other models untouched
    assert limits.request_budget("gpt-4o") == 8_192


def test_learned_window_can_be_larger_than_the_table() -> None:
    limits = ContextLimits()
    limits.learn("claude-sonnet-4-5", ContextOverflow(
        "x", limit=204_648, requested=204_915, limit_kind="context_window_incl_output"))
    assert limits.window("claude-sonnet-4-5") == 204_648


def test_tpm_budget_bounds_requests_without_changing_the_window() -> None:
    limits = ContextLimits()
    limits.learn("gpt-4o", ContextOverflow("tpm", limit=30_000, requested=30_601,
                                           limit_kind="tpm_per_request"))
    assert limits.window("gpt-4o") == 128_000
    assert limits.request_budget("gpt-4o") == 30_000
    limits.learn("gpt-4o", ContextOverflow("tpm", limit=40_000, requested=41_000,
                                           limit_kind="tpm_per_request"))
    assert limits.request_budget("gpt-4o") == 30_000  # the tighter budget stays


def test_learn_ignores_what_is_not_a_token_window() -> None:
    limits = ContextLimits()
    limits.learn("gpt-4o", ContextOverflow("no numbers", limit_kind="context_window"))
    limits.learn("gpt-4o", ContextOverflow("chars", limit=10_485_760, requested=12_000_000,
                                           limit_kind="message_chars"))
    limits.learn("gpt-4o", ContextOverflow("bytes", limit=20_971_520, limit_kind="request_bytes"))
    limits.learn("gpt-4o", RateLimited("slow down", retry_after=3))
    limits.learn(None, ContextOverflow("no model", limit=10, limit_kind="context_window"))
    assert limits.window("gpt-4o") == 128_000
    assert limits.request_budget("gpt-4o") == 128_000


def test_learn_takes_the_model_from_the_signal_and_output_caps_from_fatal() -> None:
    limits = ContextLimits()
    limits.learn(None, ContextOverflow("x", limit=16_384, requested=20_000,
                                       limit_kind="context_window", model="vllm-qwen"))
    assert limits.window("vllm-qwen") == 16_384
    limits.learn("claude-3-5-sonnet-20240620", Fatal("cap", reason="output_cap",
                                                     limit_kind="output_tokens", max_output=4_096))
    assert limits.max_output("claude-3-5-sonnet-20240620") == 4_096
    assert limits.window("claude-3-5-sonnet-20240620") == 200_000


def test_concurrent_learning_is_safe() -> None:
    limits = ContextLimits()

    def worker(i: int) -> None:
        for j in range(200):
            limits.learn(f"m{i % 4}", ContextOverflow("x", limit=1_000 + j, limit_kind="tpm_per_request"))
            limits.request_budget(f"m{i % 4}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(limits.request_budget(f"m{i}") == 1_000 for i in range(4))


# -- remembered across runs ----------------------------------------------------------------------

def test_what_was_learned_is_handed_on_and_remembered_next_time() -> None:
    taught: list[tuple[str, dict]] = []
    limits = ContextLimits(on_learn=lambda model, t: taught.append((model, t)))
    limits.learn("openai/Local-Llama", ContextOverflow(
        "x", limit=4_096, requested=5_000, limit_kind="context_window_incl_output"))
    limits.learn("local-llama", Fatal("cap", reason="output_cap", max_output=2_048))
    assert taught == [("local-llama", {"context_window": 4_096}),
                      ("local-llama", {"max_output": 2_048})]

    later = ContextLimits(remembered={"local-llama": {"context_window": 4_096,
                                                      "max_output": 2_048}})
    assert later.window("local-llama") == 4_096 and later.known("local-llama")
    assert later.max_output("local-llama") == 2_048


def test_an_override_beats_what_was_remembered_and_this_run_beats_both() -> None:
    limits = ContextLimits({"local-llama": 8_192},
                           remembered={"local-llama": {"context_window": 4_096}})
    assert limits.window("local-llama") == 8_192  # RESEARCHFLOW_CONTEXT_WINDOWS still overrides
    limits.learn("local-llama", ContextOverflow("x", limit=6_000, requested=7_000,
                                                limit_kind="context_window"))
    assert limits.window("local-llama") == 6_000


def test_a_failing_store_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def broken(model: str, taught: dict) -> None:
        raise OSError("disk full")

    limits = ContextLimits(on_learn=broken)
    with caplog.at_level(logging.WARNING, logger="researchflow.limits"):
        limits.learn("m", ContextOverflow("x", limit=1_000, requested=2_000,
                                          limit_kind="context_window"))
    assert limits.window("m") == 1_000 and "disk full" in caplog.text


def test_a_run_context_remembers_through_duckdb(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from tasks import contexts
    from core.settings import run_config

    monkeypatch.setenv("RESEARCHFLOW_DB_PATH", str(tmp_path / "store.duckdb"))
    contexts.close()
    config = run_config(Settings.load())
    contexts.context_for(config).limits.learn("local-llama", ContextOverflow(
        "x", limit=4_096, requested=5_000, limit_kind="context_window"))
    contexts.close()  # a new process
    assert contexts.context_for(config).limits.window("local-llama") == 4_096
    contexts.close()
