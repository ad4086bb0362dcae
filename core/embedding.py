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
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        vectors = np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32)
        return vectors.reshape(len(texts), -1)

    def similarities(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarity of each text to the query, in [-1, 1]."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        vectors = self.embed([query, *texts])
        return vectors[1:] @ vectors[0]


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
