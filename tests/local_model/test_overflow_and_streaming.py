"""The real server's own answers to a prompt too big for its `-c`, to an output that does not fit
beside the prompt, and to a streamed call, through the real openai SDK and our classifier."""

from __future__ import annotations

from typing import Iterator

import pytest
from pydantic import SecretStr

from core.engine.model_driven.llm_engine import LLMEngine
from core.llm.registry import make_model
from core.models import Message, Source, SubQuestion
from core.overflow.roles import condense_with_shrink
from core.overflow.tokens import TokenEstimator
from core.overflow.windows import ContextLimits
from core.settings import Settings
from core.signals import ContextOverflow
from tests.local_model.llama import LlamaServer
from tests.local_model.usage_proxy import UsageProxy

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("llama")]

SMALL_CTX = 1024
SQ = SubQuestion(index=0, question="How does the asyncio event loop run coroutines?")
SENTENCES = ["The event loop runs one ready callback at a time in a single thread.",
             "A coroutine gives control back to the loop at each await.",
             "Sockets are polled with a selector between rounds of callbacks.",
             "A finished future schedules the task that waits on it again."]
PAGE = Source(url="https://docs.example/loop", title="The event loop",
              text=" ".join(SENTENCES[i % 4] for i in range(64)))  # 864 tokens: with the
# condense prompt over the window, in three or four pieces under it (every piece generated costs
# seconds of the one core the real model gets)


@pytest.fixture(scope="module")
def small() -> Iterator[LlamaServer]:
    with LlamaServer(ctx=SMALL_CTX) as server:
        yield server


def _model(url: str, **options):
    settings = Settings(_env_file=None, openai_base_url=url, openai_api_key=SecretStr("sk-local"))
    return make_model("openai-compatible:smollm2", settings, **options)


def test_a_prompt_over_the_window_is_a_context_overflow_with_its_numbers(small):
    long = [Message(role="user", content=f"{PAGE.text} {PAGE.text}\nSummarise this.")]
    with pytest.raises(ContextOverflow) as raised:
        _model(small.base_url).complete(long, max_tokens=16)
    overflow = raised.value
    assert overflow.limit == SMALL_CTX and overflow.requested > SMALL_CTX
    assert overflow.side == "input"


def test_an_output_that_does_not_fit_beside_the_prompt_stops_at_the_window(small):
    # 815 tokens of prompt: the model runs into the window after ~200 generated, not ~370.
    prompt = [Message(role="user", content=" ".join(SENTENCES * 15) + "\nRepeat it all.")]
    completion = _model(small.base_url).complete(prompt, max_tokens=2_000)
    assert completion.truncated  # llama.cpp answers 200 with finish_reason "length"
    assert completion.usage.input_tokens + completion.usage.output_tokens <= SMALL_CTX


def test_a_window_configured_too_large_is_learned_from_the_first_overflow(small):
    """Told 8,192 for a server running 1,024: the first condense call overflows, the window is
    learned from the server's numbers, and the page is condensed in pieces that fit."""
    limits = ContextLimits({"smollm2": 8_192})
    engine = LLMEngine(_model(small.base_url), limits=limits, estimator=TokenEstimator())
    notes = condense_with_shrink(engine, SQ, PAGE)
    assert limits.window("smollm2") == SMALL_CTX
    for line in notes.splitlines():
        assert line.startswith("(") or line in PAGE.text  # the page's own sentences


def test_a_streamed_call_returns_its_text_and_the_server_usage(llama):
    with UsageProxy(llama.root) as proxy:
        model = _model(proxy.base_url, stream=True)
        completion = model.complete([Message(role="user", content="Name one planet.")],
                                    max_tokens=24)
        sent = proxy.completions()
    assert sent[0].request["stream"] is True
    assert completion.text.strip()
    assert completion.usage.input_tokens == sent[0].usage["prompt_tokens"]
    assert completion.usage.output_tokens == sent[0].usage["completion_tokens"]
