"""The embedder interface. Vectors are float32 and L2-normalised, so a dot product is a cosine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

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
