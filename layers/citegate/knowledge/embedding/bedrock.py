"""Embeddings from Amazon Bedrock (InvokeModel), called with the function's IAM role: no API key.

Two model families, each with its own request body:
- Amazon Titan Text Embeddings V2 (`amazon.titan-embed-text-v2:0`): one text per call, 256, 512
  or 1024 dimensions (1024 unless set), normalised by the model. A batch is embedded by up to
  `concurrency` calls at once.
- Cohere Embed Multilingual v3 (`cohere.embed-multilingual-v3`, also `cohere.embed-english-v3`):
  up to 96 texts per call, 1024 dimensions, with `input_type` search_document / search_query;
  the one to choose for Chinese (and other non-English) documents.

The index's vector size is fixed when it is created, so the dimension is known before any call
(`dimension` never costs a request) and every response is checked against it. Throttling is
retried by botocore (standard mode, jittered backoff); what still fails is EmbeddingUnavailable,
described by kind and error code only (citegate.platform.bedrock).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from citegate.knowledge.embedding.base import EmbeddingUnavailable, Matrix, normalise_rows
from citegate.platform import bedrock

logger = logging.getLogger(__name__)

TITAN_V2 = "amazon.titan-embed-text-v2:0"
COHERE_MULTILINGUAL = "cohere.embed-multilingual-v3"
TITAN_DIMENSIONS = (256, 512, 1024)
COHERE_DIMENSION = 1024
# Cohere on Bedrock takes at most 96 texts per call and refuses a text over 2,048 characters;
# Titan V2 takes one text of at most 50,000 characters (8,192 tokens, truncated by the model).
COHERE_BATCH = 96
COHERE_MAX_CHARS = 2048
TITAN_MAX_CHARS = 50_000


def family_of(model: str) -> str:
    """ "titan" or "cohere": which request body `model` speaks (an ARN or a region-prefixed id too)."""
    name = model.rsplit("/", 1)[-1].lower()
    if "titan-embed-text-v2" in name:
        return "titan"
    if "cohere.embed-" in name:
        return "cohere"
    raise ValueError(
        f"unsupported Bedrock embedding model {model!r}: use {TITAN_V2} or {COHERE_MULTILINGUAL}"
    )


def _clean(text: str) -> str:
    # Both models refuse an empty text: blank text is embedded as a single space everywhere.
    return text if text.strip() else " "


class BedrockEmbedder:
    def __init__(
        self,
        model: str,
        region: str,
        *,
        dimension: int | None = None,
        endpoint_url: str | None = None,
        timeout: float = 30.0,
        concurrency: int = 8,
        max_attempts: int = bedrock.DEFAULT_ATTEMPTS,
    ) -> None:
        self.model = model
        self.family = family_of(model)
        if self.family == "titan":
            dimension = dimension or 1024
            if dimension not in TITAN_DIMENSIONS:
                raise ValueError(f"{model} makes vectors of {TITAN_DIMENSIONS} dimensions, not {dimension}")
        elif dimension not in (None, COHERE_DIMENSION):
            raise ValueError(f"{model} makes {COHERE_DIMENSION}-d vectors, not {dimension}-d")
        self.dimension: int = dimension or COHERE_DIMENSION
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        # The cache key and the local index folder: the model and the size of its vectors.
        self.model_id = f"bedrock-{model.rsplit('/', 1)[-1].replace(':', '-')}-{self.dimension}"
        self._client = bedrock.LazyClient(
            lambda: bedrock.runtime_client(
                region,
                endpoint_url=endpoint_url,
                timeout=timeout,
                max_attempts=max_attempts,
                pool=concurrency + 2,
            )
        )
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BedrockEmbedder(model={self.model!r}, dimension={self.dimension})"

    def _invoke(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._client.get().invoke_model(
                modelId=self.model,
                body=json.dumps(body, ensure_ascii=False).encode("utf-8"),
                contentType="application/json",
                accept="application/json",
            )
            data = json.loads(response["body"].read())
        except bedrock.failures() as error:
            logger.warning("bedrock embedding failed: %s", error)
            raise EmbeddingUnavailable(f"Bedrock embeddings: {bedrock.describe_failure(error)}") from error
        if not isinstance(data, dict):
            raise EmbeddingUnavailable(f"Bedrock embeddings: {self.model} answered with no JSON object")
        return data

    def _rows(self, vectors: Any, count: int) -> Matrix:
        try:
            rows = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as error:
            raise EmbeddingUnavailable(
                f"Bedrock embeddings: {self.model} returned malformed vectors"
            ) from error
        if rows.shape != (count, self.dimension) or not np.isfinite(rows).all():
            raise EmbeddingUnavailable(
                f"Bedrock embeddings: {self.model} returned vectors of shape {rows.shape}, "
                f"expected ({count}, {self.dimension})"
            )
        return normalise_rows(rows)

    def _titan(self, text: str) -> Matrix:
        body = {"inputText": _clean(text)[:TITAN_MAX_CHARS], "dimensions": self.dimension, "normalize": True}
        row: Matrix = self._rows([self._invoke(body).get("embedding")], 1)[0]
        return row

    def _cohere(self, texts: Sequence[str], input_type: str) -> Matrix:
        body = {
            "texts": [_clean(t)[:COHERE_MAX_CHARS] for t in texts],
            "input_type": input_type,
            "truncate": "END",
        }
        data = self._invoke(body)
        embeddings = data.get("embeddings")
        if isinstance(embeddings, dict):  # asked with embedding_types, the floats are by type
            embeddings = embeddings.get("float")
        return self._rows(embeddings, len(texts))

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="bedrock-embed")
            return self._pool

    def _each(self, jobs: list[Any], work: Any) -> list[Matrix]:
        """`work(job)` for every job, at most `concurrency` at once, results in order."""
        if len(jobs) == 1:
            return [work(jobs[0])]
        return list(self._executor().map(work, jobs))

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        if self.family == "titan":
            return np.stack(self._each(list(texts), self._titan))
        batches = [list(texts[i : i + COHERE_BATCH]) for i in range(0, len(texts), COHERE_BATCH)]
        parts = self._each(batches, lambda batch: self._cohere(batch, "search_document"))
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> Matrix:
        if self.family == "titan":
            return self._titan(text)
        row: Matrix = self._cohere([text], "search_query")[0]
        return row
