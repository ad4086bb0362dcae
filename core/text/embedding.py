"""Meaning, offline: a small word-embedding model that ships inside its own wheel.

`wordllama` carries a 16 MB, 256-dimension model and its tokenizer in the package folder. Its
loader looks for them under a cache folder and otherwise downloads, so it is pointed at the
package's own folder with downloads disabled: loading never touches the network (0.2–0.4 s),
and embedding runs at tens of thousands of sentences per second on one core.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

DIMENSIONS = 256


class EmbeddingUnavailable(RuntimeError):
    """The model files are not where the wheel puts them (a broken install)."""


class Embedder:
    """Unit-length sentence vectors, so a dot product is a cosine similarity."""

    def __init__(self, model: object) -> None:
        self._model = model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text, in order. Texts go to the model in batches of similar length
        whose padded size stays under `BATCH_BYTES` (see `batches`)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        texts = list(texts)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        for group in batches([len(t.encode("utf-8", "replace")) for t in texts]):
            chunk = [texts[i] for i in group]
            vectors = np.asarray(self._model.embed(chunk, norm=True, batch_size=len(chunk)),
                                 dtype=np.float32)
            out[group] = vectors.reshape(len(chunk), -1)
        return out

    def similarities(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarity of each text to the query, in [-1, 1]."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        vectors = self.embed([query, *texts])
        return vectors[1:] @ vectors[0]


def batches(lengths: Sequence[int], budget: int | None = None) -> list[list[int]]:
    """Positions of texts grouped for the model, shortest first: a group's size times its
    longest text (`lengths` in UTF-8 bytes) stays within `budget` (one text alone may exceed
    it).

    wordllama pads a batch to its longest text and does not truncate, then holds a float32
    (batch, tokens, 256) array and its masked copy: 64 pages of 19k characters took 600 MB
    per call, and the demo's parallel researchers 3.3 GB. Grouped by length, a batch of
    sentences stays large (fast) and a batch of pages small (about 25 MB at most)."""
    budget = BATCH_BYTES if budget is None else budget
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: list[list[int]] = []
    for i in order:
        group = groups[-1] if groups else None
        # Sorted ascending: this text is the group's longest once added.
        if group is None or len(group) >= MAX_BATCH or \
                (len(group) + 1) * max(lengths[i], 1) > budget:
            groups.append([i])
        else:
            group.append(i)
    return groups


# About 3-4 UTF-8 bytes a token (English or CJK): 96 kB of text is a (batch, tokens, 256)
# float32 array of about 25-30 MB.
BATCH_BYTES = 96_000
MAX_BATCH = 256

_lock = threading.Lock()
_shared: Embedder | None = None


def embedder() -> Embedder:
    """The process's one embedder, loaded on first use from the installed wheel."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = Embedder(_load())
        return _shared


def _load() -> object:
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise EmbeddingUnavailable("wordllama is not installed: pip install -e .") from exc
    folder = Path(wordllama.__file__).parent
    try:
        return WordLlama.load(cache_dir=folder, disable_download=True)
    except (FileNotFoundError, OSError) as exc:
        raise EmbeddingUnavailable(
            f"wordllama's model files are missing from {folder}: reinstall the package") from exc
