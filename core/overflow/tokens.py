"""Token estimates without a tokenizer: UTF-8 bytes / 3, calibrated by what providers report.

Seed 003's rule of thumb is bytes/3: ASCII prose runs about 4 bytes per token and CJK about 3
(one token per character), so bytes/3 is right for Chinese and slightly high for English — the
safe side, since compacting early beats overflowing. When a provider reports the input tokens of
a request, `calibrate` moves that model's bytes-per-token ratio towards the observed one, so later
estimates for the same model follow its real tokenizer.

This module only counts; it never truncates and never calls a provider. It keeps no estimator of
its own: a run's is built with its context (core.context) and handed to what estimates for it, so
what one run's providers taught never moves another run's page cuts.
"""

from __future__ import annotations

import json
import threading
from typing import Sequence, Union

from core.models import Message

DEFAULT_BYTES_PER_TOKEN = 3.0
# Real tokenizers stay within these bounds for text; a ratio outside them means a bad sample
# (say, usage that counted cached images), not a tokenizer.
MIN_BYTES_PER_TOKEN = 1.0
MAX_BYTES_PER_TOKEN = 6.0
# Seed 003 adds 8 tokens per message and per tool call for the chat envelope (role markers,
# ids); kept in bytes so calibration scales it with the rest.
MESSAGE_OVERHEAD_BYTES = 24
TOOL_CALL_OVERHEAD_BYTES = 24
# Tiny requests are dominated by the provider's fixed template tokens: they would skew the ratio.
MIN_CALIBRATION_TOKENS = 64

Content = Union[str, Message, Sequence[Message]]


def content_bytes(content: Content) -> int:
    """UTF-8 size of a text, a message, or a list of messages (with the per-message envelope)."""
    if isinstance(content, str):
        return len(content.encode("utf-8"))
    if isinstance(content, Message):
        return _message_bytes(content)
    return sum(_message_bytes(m) for m in content)


def _message_bytes(m: Message) -> int:
    n = MESSAGE_OVERHEAD_BYTES + len(m.content.encode("utf-8"))
    if m.tool_call_id:
        n += len(m.tool_call_id)
    for call in m.tool_calls:
        args = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        n += TOOL_CALL_OVERHEAD_BYTES + len(call.name) + len(call.id) + len(args.encode("utf-8"))
    return n


class TokenEstimator:
    """Per-model bytes-per-token ratios, shared safely between worker threads.

    `estimate(x, model=m)` uses m's calibrated ratio, or the default ratio for a model never
    calibrated. `calibrate` smooths each new observation into the ratio, and moves faster
    towards a *lower* ratio (more tokens than we thought) than a higher one: underestimating
    is what causes overflows, overestimating only compacts a little early.
    """

    def __init__(self, bytes_per_token: float = DEFAULT_BYTES_PER_TOKEN, *,
                 alpha_down: float = 0.6, alpha_up: float = 0.25) -> None:
        self.default_ratio = _clamp(bytes_per_token)
        self.alpha_down = alpha_down
        self.alpha_up = alpha_up
        self._ratios: dict[str, float] = {}
        self._lock = threading.Lock()

    def bytes_per_token(self, model: str | None = None) -> float:
        with self._lock:
            return self._ratios.get(model or "", self.default_ratio)

    def estimate(self, content: Content, *, model: str | None = None) -> int:
        """Estimated tokens of a text or messages (rounded up: never report 0 for real text)."""
        size = content_bytes(content)
        if size == 0:
            return 0
        return max(1, int(-(-size // self.bytes_per_token(model))))

    def chars_per_token(self, sample: str, *, model: str | None = None) -> float:
        """How many characters of `sample`'s kind make one token for `model`.

        Character budgets (findings are cut in characters) need this: 1 token is ~1 Chinese
        character but ~3-4 English ones, and the bytes-per-character of the sample tells which.
        """
        if not sample:
            return self.bytes_per_token(model)
        return self.bytes_per_token(model) * len(sample) / len(sample.encode("utf-8"))

    def tokens_to_bytes(self, tokens: int, *, model: str | None = None) -> int:
        return int(tokens * self.bytes_per_token(model))

    def calibrate(self, sent: Content | int, reported_input_tokens: int | None, *,
                  model: str | None = None) -> float:
        """Fold one provider-reported input count into `model`'s ratio; return the new ratio.

        `sent` is what was sent (text, messages, or its byte count). Missing or tiny usage
        numbers are ignored, as are ratios outside the sane bounds.
        """
        size = sent if isinstance(sent, int) else content_bytes(sent)
        key = model or ""
        with self._lock:
            current = self._ratios.get(key, self.default_ratio)
            if not reported_input_tokens or reported_input_tokens < MIN_CALIBRATION_TOKENS:
                return current
            observed = size / reported_input_tokens
            if not MIN_BYTES_PER_TOKEN <= observed <= MAX_BYTES_PER_TOKEN:
                return current
            alpha = self.alpha_down if observed < current else self.alpha_up
            updated = _clamp(current + alpha * (observed - current))
            self._ratios[key] = updated
            return updated


def _clamp(ratio: float) -> float:
    return min(MAX_BYTES_PER_TOKEN, max(MIN_BYTES_PER_TOKEN, ratio))
