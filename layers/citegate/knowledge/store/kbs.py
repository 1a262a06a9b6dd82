from __future__ import annotations

import time
from typing import Any

from boto3.dynamodb.conditions import Key

from citegate.knowledge.schemas.kb import KnowledgeBase
from citegate.platform.dynamo import from_item, is_conditional_failure, query_all, to_item, utc_now
from citegate.platform.errors import KbExists, KbNotFound


class KbStore:
    """Knowledge bases in DynamoDB. Reads on the query path may accept a copy a few seconds old
    (`get(..., max_age=...)`), as policies do: a change made in this process applies at once, one
    made elsewhere within `max_age`. A knowledge base that does not exist is never cached."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self._recent: dict[str, tuple[float, KnowledgeBase]] = {}

    def create(self, kb: KnowledgeBase) -> KnowledgeBase:
        try:
            self._table.put_item(
                Item=to_item(kb.model_dump()), ConditionExpression="attribute_not_exists(kb_id)"
            )
        except Exception as error:
            if is_conditional_failure(error):
                raise KbExists(f"knowledge base {kb.kb_id!r} already exists") from error
            raise
        self._recent.pop(kb.kb_id, None)
        return kb

    def find(self, kb_id: str) -> KnowledgeBase | None:
        item = self._table.get_item(Key={"kb_id": kb_id}, ConsistentRead=True).get("Item")
        kb = KnowledgeBase.model_validate(from_item(item)) if item else None
        if kb is None:
            self._recent.pop(kb_id, None)
        else:
            self._recent[kb_id] = (time.monotonic(), kb)
        return kb

    def get(self, kb_id: str, tenant_id: str | None = None, *, max_age: float | None = None) -> KnowledgeBase:
        """The knowledge base, or kb_not_found; another tenant's knowledge base does not exist for you.
        With `max_age` (seconds), a copy read that recently in this process will do."""
        recent = self._recent.get(kb_id)
        if max_age is not None and recent is not None and time.monotonic() - recent[0] < max_age:
            kb: KnowledgeBase | None = recent[1]
        else:
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
        kb = KnowledgeBase.model_validate(from_item(item))
        self._recent[kb_id] = (time.monotonic(), kb)
        return kb

    def add_documents(self, kb_id: str, delta: int) -> None:
        self._table.update_item(
            Key={"kb_id": kb_id},
            UpdateExpression="ADD document_count :d",
            ConditionExpression="attribute_exists(kb_id)",
            ExpressionAttributeValues={":d": delta},
        )
