"""The insights table: signals (written by citegate.governance.signals), gap groups, the per-day
rollups (citegate.insights.rollups) and the grouping's state (its watermark and lease), all under
the tenant's partitions."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, cast

from citegate.governance.signals import signal_pk
from citegate.insights.rollups import VERSION, Delta, combine, from_row, read_row, rows_pk, stored_row
from citegate.platform.dynamo import (
    batch_get,
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
TRIES = 8  # transactions of one chunk whose rows another fold changed meanwhile (read again each time)
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
    rollup increments it brings."""

    sk: str
    grouped: str
    group_id: str | None
    deltas: list[Delta]
    signal: dict[str, Any] | None = None  # the whole signal item, when read whole: marked by a Put


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
        items = query_all(
            self._table,
            KeyConditionExpression=Key("pk").eq(rows_pk(tenant_id, kind))
            & Key("sk").between(first_day, last_day + "\uffff"),
        )
        return [read_row(item) for item in items]

    @property
    def name(self) -> str:
        return str(self._table.name)

    def count(self, tenant_id: str, batch: list[Counted], group_adds: dict[str, list[Delta]]) -> list[str]:
        """Add folded signals to the rollups. A transaction marks its signals counted, each on the
        condition that it was not (a retry, or a concurrent fold, adds nothing), and writes their
        rows whole, each on the condition that its version is still the one read (another fold's
        increments are never overwritten: the rows are read again and the transaction retried).
        `group_adds`: per signal sk, increments of its group's own item (answers after a fix).
        Returns the signals (sk) this call counted."""
        counted: list[str] = []
        chunk: list[Counted] = []
        keys: set[tuple[str, str]] = set()
        # Signals that add to the same rows go together (by their last row: the group's day, else
        # the summary day; in time order within it), so a transaction adds many signals to a few
        # rows instead of a few signals to many. Each signal is counted on its own condition, so
        # the order is free.
        for item in sorted(batch, key=lambda c: ([(d.pk, d.sk) for d in c.deltas][::-1], c.sk)):
            own = {(d.pk, d.sk) for d in [*item.deltas, *group_adds.get(item.sk, [])]}
            if chunk and len(chunk) + 1 + len(keys | own) > MAX_ACTIONS:
                counted += self._count_chunk(tenant_id, chunk, group_adds)
                chunk, keys = [], set()
            chunk.append(item)
            keys |= own
        if chunk:
            counted += self._count_chunk(tenant_id, chunk, group_adds)
        return counted

    def _count_chunk(
        self, tenant_id: str, chunk: list[Counted], group_adds: dict[str, list[Delta]]
    ) -> list[str]:
        left = list(chunk)
        for _ in range(TRIES):
            if not left:
                return []
            try:
                self._transact(tenant_id, left, group_adds)
            except Exception as error:
                reasons = cancellation_reasons(error)
                if reasons is None or len(reasons) < len(left):
                    raise
                # Signals counted meanwhile (their condition failed) are left out; a row whose
                # version moved is read again. Anything else is an error of its own.
                if any(r not in ("None", "ConditionalCheckFailed", "TransactionConflict") for r in reasons):
                    raise
                left = [c for c, r in zip(left, reasons, strict=False) if r != "ConditionalCheckFailed"]
                continue
            return [c.sk for c in left]
        raise RuntimeError(f"insights rollups: {len(left)} signals not counted after {TRIES} tries")

    def _current(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """The rows named, as stored now (strongly consistent: the versions are conditions)."""
        items = batch_get(self._table, [{"pk": pk, "sk": sk} for pk, sk in keys], consistent=True)
        return {(str(item["pk"]), str(item["sk"])): from_item(item) for item in items}

    def _transact(self, tenant_id: str, chunk: list[Counted], group_adds: dict[str, list[Delta]]) -> None:
        name = self._table.name
        actions: list[dict[str, Any]] = []
        for item in chunk:  # first, in order: a cancellation's reasons name them by position
            marks = {COUNTED: "1", "grouped": item.grouped} | (
                {"group_id": item.group_id} if item.group_id is not None else {}
            )
            # Counted once; expired meanwhile: leave it gone.
            condition = "attribute_exists(pk) AND attribute_not_exists(#c)"
            if item.signal is not None:  # a Put costs the embedded endpoint less than an Update
                signal = {k: v for k, v in item.signal.items() if k not in marks}
                actions.append(
                    {
                        "Put": {
                            "TableName": name,
                            "Item": to_item({**signal, **marks}),
                            "ConditionExpression": condition,
                            "ExpressionAttributeNames": {"#c": COUNTED},
                        }
                    }
                )
                continue
            actions.append(
                {
                    "Update": {
                        "TableName": name,
                        "Key": {"pk": signal_pk(tenant_id), "sk": item.sk},
                        "UpdateExpression": "SET " + ", ".join(f"#m{i} = :m{i}" for i in range(len(marks))),
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": {"#c": COUNTED}
                        | {f"#m{i}": k for i, k in enumerate(marks)},
                        "ExpressionAttributeValues": {f":m{i}": v for i, v in enumerate(marks.values())},
                    }
                }
            )
        rows = combine([d for item in chunk for d in item.deltas])
        current = self._current(list(rows))
        for key, delta in rows.items():
            stored = current.get(key)
            row = from_row(stored) if stored is not None else Delta(delta.pk, delta.sk, dict(delta.fixed))
            row.add(delta)
            put: dict[str, Any] = {"TableName": name}
            if stored is None:
                put["ConditionExpression"] = "attribute_not_exists(pk)"
            elif stored.get(VERSION) is None:  # a row of the first rollups: rewritten in this shape
                put["ConditionExpression"] = "attribute_exists(pk) AND attribute_not_exists(#v)"
                put["ExpressionAttributeNames"] = {"#v": VERSION}
            else:
                put["ConditionExpression"] = "#v = :v"
                put["ExpressionAttributeNames"] = {"#v": VERSION}
                put["ExpressionAttributeValues"] = {":v": int(stored[VERSION])}
            version = int(stored.get(VERSION) or 0) + 1 if stored is not None else 1
            actions.append({"Put": {**put, "Item": to_item(stored_row(row, version))}})
        # A group's own counters (answers after its fix mark): added, on the group item.
        for key, delta in combine([d for item in chunk for d in group_adds.get(item.sk, [])]).items():
            names = {f"#a{i}": k for i, k in enumerate(delta.counts)}
            actions.append(
                {
                    "Update": {
                        "TableName": name,
                        "Key": {"pk": key[0], "sk": key[1]},
                        "UpdateExpression": "ADD " + ", ".join(f"#a{i} :a{i}" for i in range(len(names))),
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": {
                            f":a{i}": n for i, n in enumerate(delta.counts.values())
                        },
                    }
                }
            )
        self._table.meta.client.transact_write_items(TransactItems=actions)

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
        self.groups_changed(tenant_id)

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

    def release(
        self, tenant_id: str, owner: str, watermark: str | None, groups_token: str | None = None
    ) -> bool:
        """Give the lease back, moving the watermark of counted signals (`counted_watermark`; the
        grouping's own `watermark` of before the rollups is left, so older data is counted anew)
        and naming the groups as this fold left them (`groups_token`: a process that folded last
        may keep them in memory). False when the lease was no longer this owner's."""
        sets = []
        values: dict[str, Any] = {":owner": owner}
        if watermark is not None:
            sets.append("counted_watermark = :w")
            values[":w"] = watermark
        if groups_token is not None:
            sets.append("groups_token = :g")
            values[":g"] = groups_token
        expression = ("SET " + ", ".join(sets) + " " if sets else "") + "REMOVE lease_owner, lease_until"
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
            return False
        return True

    def groups_changed(self, tenant_id: str) -> None:
        """Groups were changed outside a fold (a mark): no process may fold from memory."""
        self._table.update_item(
            Key={"pk": state_pk(tenant_id), "sk": STATE_SK},
            UpdateExpression="SET groups_token = :g",
            ExpressionAttributeValues={":g": uuid.uuid4().hex},
        )
