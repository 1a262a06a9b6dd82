from __future__ import annotations

import builtins
from typing import Any

from boto3.dynamodb.conditions import Key

from citegate.knowledge.schemas.documents import DocumentRecord
from citegate.knowledge.search.base import SearchFilter
from citegate.platform.dynamo import from_item, is_conditional_failure, query_all, to_item, utc_now
from citegate.platform.errors import DocumentNotFound


def admitted(record: DocumentRecord, scope: SearchFilter) -> bool:
    """Whether a caller with `scope` may see the document: the predicate its chunks pass."""
    meta = record.metadata
    return scope.admits_source(
        record.kb_id,
        record.source_name,
        str(meta.get("project") or ""),
        str(meta.get("path") or ""),
        str(meta.get("version") or ""),
    )


class DocumentStore:
    """Document records. Reads for a caller take its scope (`list_in`, `get_in`): a document
    outside it is absent. `list`, `find` and `get` are the ingestion pipeline's own reads."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def put(self, record: DocumentRecord) -> bool:
        """Write the record; True when the document is new to the knowledge base."""
        previous = self._table.put_item(Item=to_item(record.model_dump()), ReturnValues="ALL_OLD")
        return "Attributes" not in previous

    def find(self, kb_id: str, document_id: str) -> DocumentRecord | None:
        item = self._table.get_item(
            Key={"kb_id": kb_id, "document_id": document_id}, ConsistentRead=True
        ).get("Item")
        return DocumentRecord.model_validate(from_item(item)) if item else None

    def get(self, kb_id: str, document_id: str) -> DocumentRecord:
        record = self.find(kb_id, document_id)
        if record is None:
            raise DocumentNotFound(
                f"document {document_id!r} not found in knowledge base {kb_id!r}",
                details={"kb_id": kb_id, "document_id": document_id},
            )
        return record

    def list(self, kb_id: str) -> list[DocumentRecord]:
        items = query_all(self._table, KeyConditionExpression=Key("kb_id").eq(kb_id))
        return [DocumentRecord.model_validate(i) for i in items]

    def list_in(self, kb_id: str, scope: SearchFilter) -> builtins.list[DocumentRecord]:
        """The knowledge base's documents that `scope` admits (none when it names another kb)."""
        if kb_id not in scope.kb_ids:
            return []
        return [record for record in self.list(kb_id) if admitted(record, scope)]

    def get_in(self, kb_id: str, document_id: str, scope: SearchFilter) -> DocumentRecord:
        """One document if `scope` admits it; outside the scope it is not found, like a missing one."""
        record = self.find(kb_id, document_id) if kb_id in scope.kb_ids else None
        if record is None or not admitted(record, scope):
            raise DocumentNotFound(
                f"document {document_id!r} not found in knowledge base {kb_id!r}",
                details={"kb_id": kb_id, "document_id": document_id},
            )
        return record

    def update_if_current(self, kb_id: str, document_id: str, task_id: str, changes: dict[str, Any]) -> bool:
        """Apply `changes` only while `task_id` is still the document's latest ingestion."""
        changes = dict(changes, updated_at=utc_now())
        try:
            self._table.update_item(
                Key={"kb_id": kb_id, "document_id": document_id},
                UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in changes),
                ConditionExpression="task_id = :task",
                ExpressionAttributeNames={f"#{k}": k for k in changes},
                ExpressionAttributeValues={
                    **{f":{k}": to_item(v) for k, v in changes.items()},
                    ":task": task_id,
                },
            )
        except Exception as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def delete(self, kb_id: str, document_id: str) -> bool:
        previous = self._table.delete_item(
            Key={"kb_id": kb_id, "document_id": document_id}, ReturnValues="ALL_OLD"
        )
        return "Attributes" in previous
