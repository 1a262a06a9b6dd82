"""The insights table: signals (written by citegate.governance.signals), gap groups, and the
grouping's state (its watermark and lease), all under the tenant's partitions."""

from __future__ import annotations

import time
from typing import Any, cast

from citegate.governance.signals import signal_pk
from citegate.platform.dynamo import from_item, is_conditional_failure, query_all, to_item

STATE_SK = "grouping"
# What the gaps and summary views read of a signal (not its request id, route or TTL).
VIEW_FIELDS = (
    "sk",
    "at",
    "day",
    "question",
    "kbs",
    "projects",
    "versions",
    "paths",
    "outcome",
    "reason",
    "confidence",
    "caller_kind",
    "cited_paths",
    "nearby_paths",
    "feedback_record",
    "gap",
    "group_id",
)


def group_pk(tenant_id: str) -> str:
    return f"{tenant_id}#group"


def state_pk(tenant_id: str) -> str:
    return f"{tenant_id}#state"


class InsightsStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    # - signals -

    def signals(
        self, tenant_id: str, since: str, until: str, *, pending_only: bool = False, view: bool = False
    ) -> list[dict[str, Any]]:
        """Signals whose time is within [since, until] (ISO 8601 UTC), oldest first: those not yet
        grouped (`pending_only`), or with only what the views read (`view`)."""
        from boto3.dynamodb.conditions import Attr, Key

        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("pk").eq(signal_pk(tenant_id))
            & Key("sk").between(since, until + "\uffff"),
            "ScanIndexForward": True,
        }
        if pending_only:
            kwargs["FilterExpression"] = Attr("grouped").not_exists()
        if view:
            names = {f"#{k}": k for k in VIEW_FIELDS}
            kwargs["ProjectionExpression"] = ", ".join(names)
            kwargs["ExpressionAttributeNames"] = names
        return query_all(self._table, **kwargs)

    def mark_signal(self, tenant_id: str, sk: str, grouped: str, group_id: str | None) -> None:
        """Record what the grouping made of a signal: `grouped` is set on every signal it has seen
        (the group's id, or "-" when none), `group_id` only on a signal that belongs to a group."""
        names = {"#g": "grouped"}
        values: dict[str, Any] = {":g": grouped}
        expression = "SET #g = :g"
        if group_id is not None:
            expression += ", group_id = :id"
            values[":id"] = group_id
        try:
            self._table.update_item(
                Key={"pk": signal_pk(tenant_id), "sk": sk},
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",  # expired meanwhile: leave it gone
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as error:
            if not is_conditional_failure(error):
                raise

    # - groups -

    def groups(self, tenant_id: str) -> list[dict[str, Any]]:
        from boto3.dynamodb.conditions import Key

        items = query_all(self._table, KeyConditionExpression=Key("pk").eq(group_pk(tenant_id)))
        for item in items:
            if item.get("centroid") is not None:
                item["centroid"] = bytes(getattr(item["centroid"], "value", item["centroid"]))
        return items

    def group(self, tenant_id: str, group_id: str) -> dict[str, Any] | None:
        item = self._table.get_item(Key={"pk": group_pk(tenant_id), "sk": group_id}, ConsistentRead=True).get(
            "Item"
        )
        return cast("dict[str, Any]", from_item(item)) if item else None

    def save_group(self, tenant_id: str, group_id: str, fields: dict[str, Any]) -> None:
        """Create or update a group's grouping fields (centroid, members, times), leaving its
        marks (fixed, task, recheck) as they are."""
        sets = ", ".join(f"#{k} = :{k}" for k in fields)
        self._table.update_item(
            Key={"pk": group_pk(tenant_id), "sk": group_id},
            UpdateExpression=f"SET {sets}",
            ExpressionAttributeNames={f"#{k}": k for k in fields},
            ExpressionAttributeValues={f":{k}": to_item(v) for k, v in fields.items()},
        )

    def mark_group(self, tenant_id: str, group_id: str, sets: dict[str, Any], removes: list[str]) -> None:
        """Set or remove a group's marks; the group must exist."""
        parts = []
        if sets:
            parts.append("SET " + ", ".join(f"#{k} = :{k}" for k in sets))
        if removes:
            parts.append("REMOVE " + ", ".join(f"#{k}" for k in removes))
        kwargs: dict[str, Any] = {
            "Key": {"pk": group_pk(tenant_id), "sk": group_id},
            "UpdateExpression": " ".join(parts),
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeNames": {f"#{k}": k for k in [*sets, *removes]},
        }
        if sets:
            kwargs["ExpressionAttributeValues"] = {f":{k}": to_item(v) for k, v in sets.items()}
        self._table.update_item(**kwargs)

    # - the grouping's state -

    def state(self, tenant_id: str) -> dict[str, Any]:
        item = self._table.get_item(Key={"pk": state_pk(tenant_id), "sk": STATE_SK}, ConsistentRead=True).get(
            "Item"
        )
        return cast("dict[str, Any]", from_item(item)) if item else {}

    def take_lease(self, tenant_id: str, owner: str, seconds: float) -> bool:
        """One refresh at a time per tenant: a conditional lease that expires by itself."""
        now = time.time()
        try:
            self._table.update_item(
                Key={"pk": state_pk(tenant_id), "sk": STATE_SK},
                UpdateExpression="SET lease_owner = :owner, lease_until = :until",
                ConditionExpression="attribute_not_exists(lease_until) OR lease_until < :now",
                ExpressionAttributeValues={
                    ":owner": owner,
                    ":until": to_item(now + seconds),
                    ":now": to_item(now),
                },
            )
        except Exception as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def release(self, tenant_id: str, owner: str, watermark: str | None) -> None:
        expression = "REMOVE lease_owner, lease_until"
        values: dict[str, Any] = {":owner": owner}
        if watermark is not None:
            expression = "SET watermark = :w " + expression
            values[":w"] = watermark
        try:
            self._table.update_item(
                Key={"pk": state_pk(tenant_id), "sk": STATE_SK},
                UpdateExpression=expression,
                ConditionExpression="lease_owner = :owner",
                ExpressionAttributeValues=values,
            )
        except Exception as error:
            if not is_conditional_failure(error):
                raise
