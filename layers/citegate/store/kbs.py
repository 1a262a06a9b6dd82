from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key

from citegate.errors import KbExists, KbNotFound
from citegate.models.kb import KnowledgeBase
from citegate.store.dynamo import from_item, is_conditional_failure, query_all, to_item, utc_now


class KbStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    def create(self, kb: KnowledgeBase) -> KnowledgeBase:
        try:
            self._table.put_item(
                Item=to_item(kb.model_dump()), ConditionExpression="attribute_not_exists(kb_id)"
            )
        except Exception as error:
            if is_conditional_failure(error):
                raise KbExists(f"knowledge base {kb.kb_id!r} already exists") from error
            raise
        return kb

    def find(self, kb_id: str) -> KnowledgeBase | None:
        item = self._table.get_item(Key={"kb_id": kb_id}, ConsistentRead=True).get("Item")
        return KnowledgeBase.model_validate(from_item(item)) if item else None

    def get(self, kb_id: str, tenant_id: str | None = None) -> KnowledgeBase:
        """The knowledge base, or kb_not_found; another tenant's knowledge base does not exist for you."""
        kb = self.find(kb_id)
        if kb is None or (tenant_id is not None and kb.tenant_id != tenant_id):
            raise KbNotFound(f"knowledge base {kb_id!r} not found", details={"kb_id": kb_id})
        return kb

    def list(self, tenant_id: str) -> list[KnowledgeBase]:
        items = query_all(
            self._table, IndexName="by_tenant", KeyConditionExpression=Key("tenant_id").eq(tenant_id)
        )
        return sorted((KnowledgeBase.model_validate(i) for i in items), key=lambda kb: kb.kb_id)

    def update(self, kb_id: str, changes: dict[str, Any]) -> KnowledgeBase:
        changes = {k: v for k, v in changes.items() if v is not None}
        changes["updated_at"] = utc_now()
        names = {f"#{k}": k for k in changes}
        values = {f":{k}": to_item(v) for k, v in changes.items()}
        try:
            item = self._table.update_item(
                Key={"kb_id": kb_id},
                UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in changes),
                ConditionExpression="attribute_exists(kb_id)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except Exception as error:
            if is_conditional_failure(error):
                raise KbNotFound(f"knowledge base {kb_id!r} not found", details={"kb_id": kb_id}) from error
            raise
        return KnowledgeBase.model_validate(from_item(item))

    def add_documents(self, kb_id: str, delta: int) -> None:
        self._table.update_item(
            Key={"kb_id": kb_id},
            UpdateExpression="ADD document_count :d",
            ConditionExpression="attribute_exists(kb_id)",
            ExpressionAttributeValues={":d": delta},
        )
