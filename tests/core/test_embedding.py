"""The shared offline embedder (core/text/embedding.py) with the real wordllama model.

wordllama pads a batch to its longest text: one call over the demo's pages and sentences held a
(batch, tokens, 256) float32 array of gigabytes, and the demo peaked at 3.4 GB (issue 21,
item 7). The embedder hands the model batches of similar length within a byte budget; these
tests watch the batches the model is given, and that grouping changes no vector.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from core.text.embedding import BATCH_BYTES, MAX_BATCH, Embedder, batches, embedder


class _Spy:
    """The real model, recording each batch it is asked to embed."""

    def __init__(self, model: object) -> None:
        self.model = model
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str], **kwargs: object) -> np.ndarray:
        self.calls.append(list(texts))
        return self.model.embed(texts, **kwargs)  # type: ignore[attr-defined]


def _texts() -> list[str]:
    rng = random.Random(7)
    words = "thread process event loop coroutine garbage reference pickle json".split()
    pages = [" ".join(rng.choice(words) for _ in range(3000))[:19_000] for _ in range(24)]
    sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 20)))
                 for _ in range(300)]
    mixed = pages + sentences
    rng.shuffle(mixed)
    return mixed


@pytest.fixture(scope="module")
def spy() -> _Spy:
    return _Spy(embedder()._model)


def test_no_batch_is_padded_past_the_byte_budget(spy: _Spy) -> None:
    texts = _texts()
    Embedder(spy).embed(texts)
    assert sum(len(c) for c in spy.calls) == len(texts)
    for chunk in spy.calls:
        padded = len(chunk) * max(len(t.encode()) for t in chunk)
        # One text alone may exceed the budget; a batch of several never does.
        assert len(chunk) == 1 or padded <= BATCH_BYTES, (len(chunk), padded)
        assert len(chunk) <= MAX_BATCH
    # Sentences still go in large batches (the speed of one call for many short texts).
    assert max(len(c) for c in spy.calls) >= 100


def test_grouping_changes_no_vector_and_keeps_the_order(spy: _Spy) -> None:
    texts = _texts()[:60]
    grouped = Embedder(spy).embed(texts)
    one_by_one = np.vstack([Embedder(spy.model).embed([t]) for t in texts])
    assert grouped.shape == (60, 256)
    np.testing.assert_allclose(grouped, one_by_one, atol=1e-5)


def test_batches_cover_every_text_once_shortest_first() -> None:
    lengths = [50, 19_000, 10, 19_000, 300, 70_000, 20]
    groups = batches(lengths, budget=40_000)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert [lengths[g[0]] for g in groups] == sorted(lengths[g[0]] for g in groups)
    assert [5] in groups  # over the budget alone: its own batch
    assert all(len(g) * max(lengths[i] for i in g) <= 40_000 for g in groups if len(g) > 1)
