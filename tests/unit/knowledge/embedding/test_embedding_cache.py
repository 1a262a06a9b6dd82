"""CachedEmbedder, InMemoryEmbeddingCache, content keys and the vector wire format."""

from __future__ import annotations

import hashlib
import logging
import struct
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from citegate.knowledge.embedding import (
    CachedEmbedder,
    HashingEmbedder,
    InMemoryEmbeddingCache,
    content_key,
    decode_vector,
    encode_vector,
)
from citegate.knowledge.embedding.base import Matrix


class CountingEmbedder:
    """A fake inner embedder that records what it was asked to embed."""

    def __init__(self, dimension: int = 16) -> None:
        self._inner = HashingEmbedder(dimension)
        self.model_id = "counting"
        self.dimension = dimension
        self.document_calls: list[list[str]] = []
        self.query_calls: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        self.document_calls.append(list(texts))
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> Matrix:
        self.query_calls.append(text)
        return self._inner.embed_query(text)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.document_calls for t in call]


def test_embeds_only_misses_and_dedupes() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, InMemoryEmbeddingCache())

    first = cached.embed_documents(["alpha", "beta", "alpha"])
    assert inner.embedded == ["alpha", "beta"]
    assert (cached.hits, cached.misses) == (0, 2)
    assert first.shape == (3, 16)
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(first, inner._inner.embed_documents(["alpha", "beta", "alpha"]))

    second = cached.embed_documents(["beta", "gamma", "alpha", "gamma"])
    assert inner.document_calls[-1] == ["gamma"]
    assert (cached.hits, cached.misses) == (2, 3)
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[2], first[0])
    np.testing.assert_array_equal(second[1], second[3])

    cached.embed_documents(["alpha", "beta"])
    assert len(inner.document_calls) == 2  # all hits: the inner embedder is not called
    assert (cached.hits, cached.misses) == (4, 3)

    cached.reset_counters()
    assert (cached.hits, cached.misses) == (0, 0)


def test_recent_queries_are_kept_in_process_not_in_the_document_cache() -> None:
    inner = CountingEmbedder()
    cache = InMemoryEmbeddingCache()
    cached = CachedEmbedder(inner, cache)
    first = cached.embed_query("what is alpha?")
    first[:] = 0  # a caller scribbling on its vector does not change the next caller's
    again = cached.embed_query("what is alpha?")
    assert inner.query_calls == ["what is alpha?"]
    np.testing.assert_array_equal(again, inner._inner.embed_query("what is alpha?"))
    cached.embed_query("what is beta?")
    assert inner.query_calls == ["what is alpha?", "what is beta?"]
    # Query vectors never reach the shared document cache, nor its counters.
    assert len(cache) == 0
    assert (cached.hits, cached.misses) == (0, 0)


def test_the_query_cache_forgets_the_least_recent(monkeypatch: pytest.MonkeyPatch) -> None:
    import citegate.knowledge.embedding.cache as module

    monkeypatch.setattr(module, "QUERY_CACHE_ENTRIES", 2)
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, InMemoryEmbeddingCache())
    for text in ("a", "b", "a", "c", "a", "b"):
        cached.embed_query(text)
    assert inner.query_calls == ["a", "b", "c", "b"]


def test_passes_model_identity_through() -> None:
    inner = CountingEmbedder(dimension=8)
    cached = CachedEmbedder(inner, InMemoryEmbeddingCache())
    assert (cached.model_id, cached.dimension) == ("counting", 8)
    assert cached.embed_documents([]).shape == (0, 8)


def test_cache_is_keyed_by_model() -> None:
    cache = InMemoryEmbeddingCache()
    cache.put_many("model-a", {content_key("x"): np.ones(4, dtype=np.float32)})
    assert content_key("x") in cache.get_many("model-a", [content_key("x")])
    assert cache.get_many("model-b", [content_key("x")]) == {}


def test_wrong_shaped_cached_vector_is_a_miss() -> None:
    inner = CountingEmbedder(dimension=16)
    cache = InMemoryEmbeddingCache()
    cache.put_many("counting", {content_key("alpha"): np.ones(8, dtype=np.float32)})
    rows = CachedEmbedder(inner, cache).embed_documents(["alpha"])
    assert inner.embedded == ["alpha"]
    assert rows.shape == (1, 16)
    assert cache.get_many("counting", [content_key("alpha")])[content_key("alpha")].shape == (16,)


class BrokenCache:
    def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Matrix]:
        raise RuntimeError("throttled")

    def put_many(self, model_id: str, items: Mapping[str, Matrix]) -> None:
        raise RuntimeError("throttled")


def test_a_failing_cache_costs_time_not_the_call(caplog: pytest.LogCaptureFixture) -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, BrokenCache())
    with caplog.at_level(logging.WARNING, logger="citegate.knowledge.embedding.cache"):
        rows = cached.embed_documents(["alpha", "beta"])
    assert rows.shape == (2, 16)
    assert inner.embedded == ["alpha", "beta"]
    assert "cache read failed" in caplog.text and "cache write failed" in caplog.text


def test_results_cannot_corrupt_the_cache() -> None:
    cached = CachedEmbedder(CountingEmbedder(), InMemoryEmbeddingCache())
    original = cached.embed_documents(["alpha"]).copy()
    cached.embed_documents(["alpha"])[0] += 1.0
    np.testing.assert_array_equal(cached.embed_documents(["alpha"]), original)


def test_in_memory_cache_bound_drops_least_recently_used() -> None:
    cache = InMemoryEmbeddingCache(max_entries=2)
    v = np.zeros(3, dtype=np.float32)
    cache.put_many("m", {"a": v, "b": v})
    cache.get_many("m", ["a"])  # "a" is now more recent than "b"
    cache.put_many("m", {"c": v})
    assert sorted(cache.get_many("m", ["a", "b", "c"])) == ["a", "c"]


def test_content_key() -> None:
    key = content_key("héllo 世界")
    assert key == hashlib.sha256("héllo 世界".encode()).hexdigest()[:32]
    assert len(key) == 32 and all(ch in "0123456789abcdef" for ch in key)
    assert content_key("a") != content_key("a ")


def test_vector_round_trip() -> None:
    v = np.random.default_rng(0).standard_normal(384).astype(np.float32)
    data = encode_vector(v)
    assert len(data) == 384 * 4
    back = decode_vector(data, 384)
    assert back.dtype == np.float32 and back.shape == (384,)
    np.testing.assert_array_equal(back, v)
    back[0] = 7.0  # decoded vectors are writable copies


def test_vector_wire_format_is_float32_little_endian() -> None:
    assert encode_vector([1.0, -2.5]) == struct.pack("<2f", 1.0, -2.5)
    np.testing.assert_array_equal(decode_vector(struct.pack("<2f", 1.0, -2.5), 2), [1.0, -2.5])
    big_endian = np.array([1.0, -2.5], dtype=">f4")
    assert encode_vector(big_endian) == struct.pack("<2f", 1.0, -2.5)


def test_vector_wire_format_errors() -> None:
    with pytest.raises(ValueError, match="bytes"):
        decode_vector(b"\x00" * 12, 4)
    with pytest.raises(ValueError, match="1-d"):
        encode_vector(np.zeros((2, 2)))
