"""Embeddings cached by model and content hash: re-ingesting or reindexing embeds only what changed.

A cache stores one vector per (model_id, content_key(text)). Back ends (in memory here, DynamoDB
elsewhere) implement `EmbeddingCache`; persistent ones store vectors with `encode_vector`, i.e. as
float32 little-endian bytes, and read them back with `decode_vector`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from citegate.knowledge.embedding.base import Embedder, Matrix

logger = logging.getLogger(__name__)

_WIRE_DTYPE = np.dtype("<f4")


def content_key(text: str) -> str:
    """sha256 of the UTF-8 text, first 32 hex digits (128 bits: collisions are not a concern)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def encode_vector(vector: npt.ArrayLike) -> bytes:
    """A 1-d vector as float32 little-endian bytes (4 bytes per component)."""
    v = np.asarray(vector, dtype=np.float32)
    if v.ndim != 1:
        raise ValueError(f"expected a 1-d vector, got shape {v.shape}")
    return v.astype(_WIRE_DTYPE, copy=False).tobytes()


def decode_vector(data: bytes, dimension: int) -> Matrix:
    """The inverse of `encode_vector`; ValueError if the byte length does not match `dimension`."""
    expected = dimension * _WIRE_DTYPE.itemsize
    if len(data) != expected:
        raise ValueError(f"expected {expected} bytes for {dimension} floats, got {len(data)}")
    # Copy: frombuffer is read-only and little-endian; callers get a native, writable array.
    return np.frombuffer(data, dtype=_WIRE_DTYPE).astype(np.float32)


class EmbeddingCache(Protocol):
    def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Matrix]:
        """The cached vectors (shape (dimension,)) of those keys that are present; misses are absent."""

    def put_many(self, model_id: str, items: Mapping[str, Matrix]) -> None:
        """Store vectors by content key (overwriting is fine: same key, same model, same vector)."""


class InMemoryEmbeddingCache:
    """A thread-safe dict, optionally bounded (least recently used entries are dropped first)."""

    def __init__(self, max_entries: int | None = None) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be >= 1 or None")
        self.max_entries = max_entries
        self._items: OrderedDict[tuple[str, str], Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Matrix]:
        found: dict[str, Matrix] = {}
        with self._lock:
            for key in keys:
                vector = self._items.get((model_id, key))
                if vector is not None:
                    self._items.move_to_end((model_id, key))
                    # A copy, so a caller scribbling on a result cannot corrupt the cache.
                    found[key] = vector.copy()
        return found

    def put_many(self, model_id: str, items: Mapping[str, Matrix]) -> None:
        with self._lock:
            for key, vector in items.items():
                self._items[(model_id, key)] = np.array(vector, dtype=np.float32).reshape(-1)
                self._items.move_to_end((model_id, key))
            if self.max_entries is not None:
                while len(self._items) > self.max_entries:
                    self._items.popitem(last=False)


QUERY_CACHE_ENTRIES = 2048  # 2048 x 512 float32 = 4 MB with the default embedder


class CachedEmbedder:
    """An Embedder that reuses cached document vectors and embeds only the misses.

    Within one call, equal texts are embedded once. Counters, cumulative over calls and counting
    distinct texts per call: `misses` texts were embedded, `hits` were reused from the cache.
    A cache that fails (e.g. DynamoDB throttling) is logged and treated as empty: it costs
    embedding time, never an ingestion. Cached vectors of the wrong shape (a model that changed
    under the same id) are treated as misses and overwritten.

    The last QUERY_CACHE_ENTRIES query vectors are kept in this process only: agents and the query
    planner repeat queries, and a query embedding costs 2 ms (USE) to 30 ms (e5).
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id: str = inner.model_id
        self.hits = 0
        self.misses = 0
        self._counter_lock = threading.Lock()
        self._queries = InMemoryEmbeddingCache(QUERY_CACHE_ENTRIES)

    # The protocol declares a settable `dimension`; it stays the inner embedder's, which may only
    # learn it on first use (OpenAI-compatible endpoints).
    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self.inner.dimension = value

    def _lookup(self, keys: list[str]) -> dict[str, Matrix]:
        try:
            return self.cache.get_many(self.model_id, keys)
        except Exception:
            logger.warning("embedding cache read failed; embedding %d texts afresh", len(keys), exc_info=True)
            return {}

    def _store(self, items: dict[str, Matrix]) -> None:
        try:
            self.cache.put_many(self.model_id, items)
        except Exception:
            logger.warning("embedding cache write failed for %d vectors", len(items), exc_info=True)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return self.inner.embed_documents(texts)
        keys = [content_key(t) for t in texts]
        unique: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            unique.setdefault(key, text)

        dimension = self.inner.dimension
        vectors: dict[str, Matrix] = {}
        for key, vector in self._lookup(list(unique)).items():
            v = np.asarray(vector, dtype=np.float32).reshape(-1)
            if key in unique and v.shape == (dimension,) and np.isfinite(v).all():
                vectors[key] = v

        missing = [key for key in unique if key not in vectors]
        if missing:
            fresh = self.inner.embed_documents([unique[key] for key in missing])
            new = {key: fresh[i] for i, key in enumerate(missing)}
            self._store(new)
            vectors.update(new)

        with self._counter_lock:
            self.hits += len(unique) - len(missing)
            self.misses += len(missing)
        return np.stack([vectors[key] for key in keys]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Matrix:
        key = content_key(text)
        found = self._queries.get_many(self.model_id, [key]).get(key)
        if found is not None and found.shape == (self.inner.dimension,):
            return found
        vector = self.inner.embed_query(text)
        self._queries.put_many(self.model_id, {key: vector})
        return vector

    def reset_counters(self) -> None:
        with self._counter_lock:
            self.hits = 0
            self.misses = 0
