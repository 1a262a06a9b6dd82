from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boto3.dynamodb.conditions import Key

from citegate.platform.dynamo import batch_get, from_item, query_all, to_item


def doc_key(kb_id: str, document_id: str) -> str:
    return f"{kb_id}#{document_id}"


class ParentStore:
    """Parent chunks by document: written at indexing, read for answer context and citations."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def replace(self, kb_id: str, document_id: str, parents: Sequence[dict[str, Any]]) -> None:
        key = doc_key(kb_id, document_id)
        keep = {p["parent_id"] for p in parents}
        stale = [p["parent_id"] for p in self.list(kb_id, document_id) if p["parent_id"] not in keep]
        with self._table.batch_writer(overwrite_by_pkeys=["doc_key", "parent_id"]) as batch:
            for parent in parents:
                batch.put_item(Item=to_item({**parent, "doc_key": key}))
            for parent_id in stale:
                batch.delete_item(Key={"doc_key": key, "parent_id": parent_id})

    def list(self, kb_id: str, document_id: str) -> list[dict[str, Any]]:
        return query_all(self._table, KeyConditionExpression=Key("doc_key").eq(doc_key(kb_id, document_id)))

    def get_many(self, keys: Sequence[tuple[str, str, str]]) -> dict[str, dict[str, Any]]:
        """Parents by (kb_id, document_id, parent_id); the result is keyed by parent_id."""
        unique = list(dict.fromkeys(keys))
        items = batch_get(
            self._table, [{"doc_key": doc_key(kb, doc), "parent_id": pid} for kb, doc, pid in unique]
        )
        return {plain["parent_id"]: plain for plain in (from_item(item) for item in items)}

    def delete_document(self, kb_id: str, document_id: str) -> int:
        parents = self.list(kb_id, document_id)
        key = doc_key(kb_id, document_id)
        with self._table.batch_writer() as batch:
            for parent in parents:
                batch.delete_item(Key={"doc_key": key, "parent_id": parent["parent_id"]})
        return len(parents)
