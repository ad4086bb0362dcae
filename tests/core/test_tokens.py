from __future__ import annotations

import threading

import pytest

from core.models import Message, ToolCall
from core.overflow.tokens import (DEFAULT_BYTES_PER_TOKEN, MAX_BYTES_PER_TOKEN,
                                  MESSAGE_OVERHEAD_BYTES, MIN_BYTES_PER_TOKEN, TokenEstimator,
                                  content_bytes)


def test_bytes_over_three_for_ascii_and_chinese() -> None:
    est = TokenEstimator()
    assert est.estimate("a" * 300) == 100
    # Chinese is 3 bytes a character: about one token per character.
    assert est.estimate("上下文窗口" * 20) == 100
    assert est.estimate("") == 0
    assert est.estimate("x") == 1  # rounded up, never 0 for real text


def test_messages_count_envelope_and_tool_calls() -> None:
    plain = Message(role="user", content="abc")
    assert content_bytes(plain) == MESSAGE_OVERHEAD_BYTES + 3
    call = Message(role="assistant", tool_calls=(ToolCall(id="c1", name="search",
                                                          arguments={"q": "量子"}),))
    result = Message(role="tool", content="ok", tool_call_id="c1")
    assert content_bytes(call) > MESSAGE_OVERHEAD_BYTES + len("search") + len("量子".encode())
    assert content_bytes([call, result]) == content_bytes(call) + content_bytes(result)
    assert TokenEstimator().estimate([plain, result]) == -(-content_bytes([plain, result]) // 3)


def test_calibration_moves_towards_observed_and_is_per_model() -> None:
    est = TokenEstimator()
    text = "word " * 4000  # 20 000 bytes
    assert est.estimate(text, model="m") == 6667
    # The provider says 5000 tokens: 4 bytes/token. Estimates move towards it, slowly upwards.
    for _ in range(30):
        est.calibrate(text, 5000, model="m")
    assert est.bytes_per_token("m") == pytest.approx(4.0, rel=0.01)
    assert est.estimate(text, model="m") == pytest.approx(5000, rel=0.01)
    assert est.bytes_per_token("other") == 3.0  # other models untouched


def test_calibration_adopts_lower_ratio_faster_than_higher() -> None:
    down, up = TokenEstimator(), TokenEstimator()
    down.calibrate(20_000, 10_000, model="m")  # 2 bytes/token: we underestimated
    up.calibrate(20_000, 5_000, model="m")  # 4 bytes/token: we overestimated
    assert 3.0 - down.bytes_per_token("m") > up.bytes_per_token("m") - 3.0


@pytest.mark.parametrize("sent,reported", [(10_000, None), (10_000, 0), (100, 10),
                                           (10_000, 100_000), (1_000_000, 1000)])
def test_calibration_ignores_missing_tiny_or_insane_samples(sent: int, reported: int | None) -> None:
    est = TokenEstimator()
    assert est.calibrate(sent, reported, model="m") == 3.0
    assert est.bytes_per_token("m") == 3.0


def test_ratio_stays_within_bounds() -> None:
    est = TokenEstimator()
    for _ in range(100):
        est.calibrate(1000, 1000, model="m")  # 1 byte/token, at the lower bound
    assert MIN_BYTES_PER_TOKEN <= est.bytes_per_token("m") <= MAX_BYTES_PER_TOKEN
    assert TokenEstimator(100.0).bytes_per_token() == MAX_BYTES_PER_TOKEN


def test_chars_per_token_follows_script() -> None:
    est = TokenEstimator()
    assert est.chars_per_token("hello world") == pytest.approx(3.0)
    assert est.chars_per_token("你好世界") == pytest.approx(1.0)
    assert est.tokens_to_bytes(100) == 300


def test_concurrent_calibration_is_consistent() -> None:
    est = TokenEstimator()

    def work() -> None:
        for _ in range(500):
            est.calibrate(40_000, 10_000, model="m")
            est.estimate("abc" * 100, model="m")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert est.bytes_per_token("m") == pytest.approx(4.0, rel=1e-6)


def test_what_one_estimator_learned_stays_its_own() -> None:
    """Each run's context builds its own estimator (core.context): there is no process-wide one
    whose calibration by one run's provider would move another run's page cuts."""
    taught = TokenEstimator()
    taught.calibrate("x" * 4000, 2000, model="m")
    assert taught.bytes_per_token("m") < DEFAULT_BYTES_PER_TOKEN
    assert TokenEstimator().bytes_per_token("m") == DEFAULT_BYTES_PER_TOKEN
