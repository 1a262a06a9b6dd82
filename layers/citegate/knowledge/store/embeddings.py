from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from citegate.knowledge.embedding.cache import decode_vector, encode_vector
from citegate.platform.dynamo import batch_get


class DynamoEmbeddingCache:
    """Embeddings by model and content hash, so re-ingesting embeds only what changed."""

    def __init__(self, table: Any) -> None:
        self._table = table

    @staticmethod
    def _key(model_id: str, key: str) -> str:
        return f"{model_id}#{key}"

    def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Any]:
        unique = list(dict.fromkeys(keys))
        items = batch_get(self._table, [{"cache_key": self._key(model_id, k)} for k in unique])
        return {
            str(item["cache_key"]).split("#", 1)[1]: decode_vector(
                bytes(item["vector"]), int(item["dimension"])
            )
            for item in items
        }

    def put_many(self, model_id: str, items: Mapping[str, Any]) -> None:
        with self._table.batch_writer(overwrite_by_pkeys=["cache_key"]) as batch:
            for key, vector in items.items():
                v = np.asarray(vector, dtype=np.float32)
                batch.put_item(
                    Item={
                        "cache_key": self._key(model_id, key),
                        "vector": encode_vector(v),
                        "dimension": int(v.shape[0]),
                    }
                )
