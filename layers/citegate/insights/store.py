"""The insights table: signals (written by citegate.governance.signals), gap groups, the per-day
rollups (citegate.insights.rollups) and the grouping's state (its watermark and lease), all under
the tenant's partitions."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from citegate.governance.signals import signal_pk
from citegate.insights.rollups import Delta, combine, rows_pk, update_of
from citegate.platform.dynamo import (
    cancellation_reasons,
    from_item,
    is_conditional_failure,
    query_all,
    to_item,
)
from citegate.platform.observability import logger

STATE_SK = "grouping"
COUNTED = "counted"  # set on a signal in the transaction that adds it to the rollups
MAX_ACTIONS = 25  # per transaction: DynamoDB takes 100, the embedded endpoint (moto) 25
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
    "grouped",
    "counted",
    "expires_at",
)


@dataclass
class Counted:
    """A signal folded: what the grouping made of it (`grouped`: the group id, or "-") and the
    rollup increments it brings. `late`: older than signals already counted."""

    sk: str
    grouped: str
    group_id: str | None
    deltas: list[Delta]
    late: bool = False


def group_pk(tenant_id: str) -> str:
    return f"{tenant_id}#group"


def state_pk(tenant_id: str) -> str:
    return f"{tenant_id}#state"


class InsightsStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    # - signals -

    def signals(
        self,
        tenant_id: str,
        since: str,
        until: str,
        *,
        pending_only: bool = False,
        uncounted_only: bool = False,
        view: bool = False,
    ) -> list[dict[str, Any]]:
        """Signals whose time is within [since, until] (ISO 8601 UTC), oldest first: those not yet
        grouped (`pending_only`) or not yet in the rollups (`uncounted_only`), or with only what
        the views read (`view`)."""
        from boto3.dynamodb.conditions import Attr, Key

        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key("pk").eq(signal_pk(tenant_id))
            & Key("sk").between(since, until + "\uffff"),
            "ScanIndexForward": True,
        }
        if pending_only:
            kwargs["FilterExpression"] = Attr("grouped").not_exists()
        if uncounted_only:
            kwargs["FilterExpression"] = Attr(COUNTED).not_exists()
        if view:
            names = {f"#{k}": k for k in VIEW_FIELDS}
            kwargs["ProjectionExpression"] = ", ".join(names)
            kwargs["ExpressionAttributeNames"] = names
        return query_all(self._table, **kwargs)

    # - rollups -

    def rows(self, tenant_id: str, kind: str, first_day: str, last_day: str) -> list[dict[str, Any]]:
        """The rollup rows of one kind (rollups.GROUP_DAY, SUMMARY_DAY) of the days in [first, last]."""
        from boto3.dynamodb.conditions import Key

        if first_day > last_day:
            return []
        return query_all(
            self._table,
            KeyConditionExpression=Key("pk").eq(rows_pk(tenant_id, kind))
            & Key("sk").between(first_day, last_day + "\uffff"),
        )

    def count(self, tenant_id: str, batch: list[Counted], group_adds: dict[str, list[Delta]]) -> int:
        """Add folded signals to the rollups, each in one transaction with its "counted" mark: a
        signal already counted (a retry, or a concurrent fold) adds nothing. `group_adds`: per
        signal sk, increments of its group's own item (answers after a fix). Returns how many
        signals this call counted."""
        counted = 0
        chunk: list[Counted] = []
        keys: set[tuple[str, str]] = set()
        for item in batch:
            own = {(d.pk, d.sk) for d in [*item.deltas, *group_adds.get(item.sk, [])]}
            if chunk and len(chunk) + 1 + len(keys | own) > MAX_ACTIONS:
                counted += self._count_chunk(tenant_id, chunk, group_adds)
                chunk, keys = [], set()
            chunk.append(item)
            keys |= own
        if chunk:
            counted += self._count_chunk(tenant_id, chunk, group_adds)
        return counted

    def _count_chunk(self, tenant_id: str, chunk: list[Counted], group_adds: dict[str, list[Delta]]) -> int:
        try:
            self._transact(tenant_id, chunk, group_adds)
        except Exception as error:
            if cancellation_reasons(error) is None:
                raise
            # One of them was counted already (or expired): each on its own, skipping those.
            if len(chunk) == 1:
                reasons = cancellation_reasons(error) or []
                if reasons and reasons[0] == "ConditionalCheckFailed":
                    return 0
                raise
            return sum(self._count_chunk(tenant_id, [item], group_adds) for item in chunk)
        return len(chunk)

    def _transact(self, tenant_id: str, chunk: list[Counted], group_adds: dict[str, list[Delta]]) -> None:
        name = self._table.name
        actions: list[dict[str, Any]] = []
        for item in chunk:
            expression = "SET #c = :c, #g = :g"
            values: dict[str, Any] = {":c": "1", ":g": item.grouped}
            if item.group_id is not None:
                expression += ", #id = :id"
                values[":id"] = item.group_id
            actions.append(
                {
                    "Update": {
                        "TableName": name,
                        "Key": {"pk": signal_pk(tenant_id), "sk": item.sk},
                        "UpdateExpression": expression,
                        # Counted once; expired meanwhile: leave it gone.
                        "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(#c)",
                        "ExpressionAttributeNames": {"#c": COUNTED, "#g": "grouped"}
                        | ({"#id": "group_id"} if item.group_id is not None else {}),
                        "ExpressionAttributeValues": values,
                    }
                }
            )
        late = {(d.pk, d.sk) for item in chunk if item.late for d in item.deltas}
        combined = combine([d for item in chunk for d in [*item.deltas, *group_adds.get(item.sk, [])]])
        for key, delta in combined.items():
            actions.append({"Update": {"TableName": name, **to_item(update_of(delta, late=key in late))}})
        self._table.meta.client.transact_write_items(TransactItems=actions)
        for key in late:  # first and last as min and max: conditional writes, idempotent
            delta = combined[key]
            for attribute, value, test in (("first", delta.first, ">"), ("last", delta.last, "<")):
                if value is None:
                    continue
                try:
                    self._table.update_item(
                        Key={"pk": delta.pk, "sk": delta.sk},
                        UpdateExpression="SET #a = :v",
                        ConditionExpression=f"attribute_exists(pk) AND #a {test} :v",
                        ExpressionAttributeNames={"#a": attribute},
                        ExpressionAttributeValues={":v": value},
                    )
                except Exception as error:
                    if not is_conditional_failure(error):
                        raise

    # - groups -

    def groups(self, tenant_id: str) -> list[dict[str, Any]]:
        """Every group item, merged ones included (`merged_into` names the group that absorbed it)."""
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
        names = [*sets, *removes]  # by position: some names (a:<time>:answered) are no placeholders
        if sets:
            parts.append("SET " + ", ".join(f"#n{i} = :v{i}" for i in range(len(sets))))
        if removes:
            parts.append("REMOVE " + ", ".join(f"#n{i}" for i in range(len(sets), len(names))))
        kwargs: dict[str, Any] = {
            "Key": {"pk": group_pk(tenant_id), "sk": group_id},
            "UpdateExpression": " ".join(parts),
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeNames": {f"#n{i}": k for i, k in enumerate(names)},
        }
        if sets:
            kwargs["ExpressionAttributeValues"] = {f":v{i}": to_item(v) for i, v in enumerate(sets.values())}
        self._table.update_item(**kwargs)

    def merge(self, tenant_id: str, survivor: str, sets: dict[str, Any], absorbed: str, at: str) -> bool:
        """Fold group `absorbed` into `survivor` in one transaction: the survivor takes `sets` (its
        new centroid, members, samples, marks), the absorbed one is marked `merged_into`. False when
        either was merged meanwhile (nothing is written): merging is idempotent."""
        name = self._table.name
        condition = "attribute_exists(pk) AND attribute_not_exists(merged_into)"
        try:
            self._table.meta.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": name,
                            "Key": {"pk": group_pk(tenant_id), "sk": survivor},
                            "UpdateExpression": "SET " + ", ".join(f"#{i} = :{i}" for i in range(len(sets))),
                            "ConditionExpression": condition,
                            "ExpressionAttributeNames": {f"#{i}": k for i, k in enumerate(sets)},
                            "ExpressionAttributeValues": {
                                f":{i}": to_item(v) for i, v in enumerate(sets.values())
                            },
                        }
                    },
                    {
                        "Update": {
                            "TableName": name,
                            "Key": {"pk": group_pk(tenant_id), "sk": absorbed},
                            "UpdateExpression": "SET merged_into = :s, merged_at = :at",
                            "ConditionExpression": condition,
                            "ExpressionAttributeValues": {":s": survivor, ":at": at},
                        }
                    },
                ]
            )
        except Exception as error:
            if cancellation_reasons(error) is None:
                raise
            logger.info("insights merge skipped", extra={"survivor": survivor, "absorbed": absorbed})
            return False
        return True

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
        """Give the lease back, moving the watermark of counted signals (`counted_watermark`; the
        grouping's own `watermark` of before the rollups is left, so older data is counted anew)."""
        expression = "REMOVE lease_owner, lease_until"
        values: dict[str, Any] = {":owner": owner}
        if watermark is not None:
            expression = "SET counted_watermark = :w " + expression
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
