"""The embedder interface. Vectors are float32 and L2-normalised, so a dot product is a cosine."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class EmbeddingUnavailable(Exception):
    """The embedding model cannot be loaded or reached."""


class Embedder(Protocol):
    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        """One row per text, shape (len(texts), dimension)."""

    def embed_query(self, text: str) -> Matrix:
        """Shape (dimension,). Models with asymmetric prompts (e5) prefix queries differently."""


def normalise_rows(matrix: npt.NDArray[np.floating]) -> Matrix:
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        n = float(np.linalg.norm(m))
        return m / n if n > 0 else m
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: Matrix = (m / norms).astype(np.float32, copy=False)
    return normalised


class LoadedModel:
    """A local model loaded once per process, and the locks that share it.

    `lock` serialises calls into the model: a call already uses every core it was given, so two at
    once only oversubscribe them. It is released between the batches of a document call, so a
    query waits for one batch, not a whole ingestion. `documents` is held for a whole call of
    several batches: concurrent ingestion batches are embedded one after the other, not
    round-robin, so each batch's index and finalize steps overlap the next one's embedding instead
    of all landing at the end (benchmarks/ingestion.py).
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.lock = threading.Lock()
        self.documents = threading.Lock()

    def whole_call(self, texts: int, batch_size: int) -> AbstractContextManager[Any]:
        """What a document call of `texts` texts holds throughout: `documents` when it takes
        several batches; a one-batch call (the ask path's few sentences) waits, like a query, only
        for the batch in progress."""
        return self.documents if texts > batch_size else nullcontext()
