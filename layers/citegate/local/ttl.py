"""What DynamoDB's Time to Live does in AWS: delete items whose TTL attribute (epoch seconds) has
passed. moto records the TTL setting but never deletes, so on a long-running local server the rate
counters, idempotency records, sessions and cached web pages would pile up; moto's transactions
copy a whole table, so a growing table also slows every call that uses one.

Like AWS, an item is deleted only when its attribute is a number in the past (a missing or
non-number attribute keeps it), and code must not rely on when the deletion happens. Audit
records expire too (CITEGATE_AUDIT_RETENTION_DAYS, 7 days locally by default).

The expired items are found by reading the embedded endpoint's tables in this process, and
deleted through the endpoint, so that the journal records it. A Scan with a filter makes moto
build and test every item: with 50,000 audit records a sweep took 5.2 s of CPU (every minute),
against 0.03 s read here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from citegate import resources
from citegate.observability import logger

SWEEP_INTERVAL_SECONDS = 60.0
# Only numbers expire (as in AWS); the type test first also spares moto comparing a string with a
# number, which it cannot. `#ttl` is the table's TTL attribute.
EXPIRED = "attribute_type(#ttl, :number) AND #ttl < :now"


def _expired_values(now: int) -> dict[str, Any]:
    return {":now": {"N": str(now)}, ":number": {"S": "N"}}


def _expired_in_process(name: str, keys: list[str], attribute: str, now: int) -> list[dict[str, Any]] | None:
    """The keys of `name`'s items whose `attribute` is a number below `now`, read from moto's table
    in this process; None when the table is not in this process (then a Scan finds them). What
    is read may be a moment old: the delete checks again."""
    from citegate.local import moto_state

    table = moto_state.find_table(name)
    if table is None:
        return None
    expired = []
    for item in moto_state.items_of(table):
        value = item.attrs.get(attribute)
        if value is None or value.type != "N":
            continue
        try:
            if Decimal(value.value) >= now:
                continue
        except (InvalidOperation, TypeError):
            continue
        try:
            expired.append({key: moto_state.wire(item.attrs[key]) for key in keys})
        except KeyError:
            continue
    return expired


class TtlSweeper:
    def __init__(
        self,
        dynamodb: Any,
        stage: str,
        interval: float = SWEEP_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._dynamodb = dynamodb  # a boto3 client on the embedded endpoint
        # (table name, its primary key attributes, its TTL attribute) for every table with a TTL
        self._tables = [
            (
                shape.physical_name(stage),
                [shape.partition_key] + ([shape.sort_key] if shape.sort_key else []),
                shape.ttl_attribute,
            )
            for shape in resources.TABLES
            if shape.ttl_attribute
        ]
        self._interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep_once(self) -> int:
        """Delete every expired item now; the number deleted."""
        deleted = 0
        now = int(self._clock())
        for name, keys, attribute in self._tables:
            expired = _expired_in_process(name, keys, attribute, now)
            if expired is not None:
                for key in expired:
                    deleted += self._delete_if_expired(name, key, attribute, now)
                continue
            names = {f"#k{i}": key for i, key in enumerate(keys)} | {"#ttl": attribute}
            scan: dict[str, Any] = {
                "TableName": name,
                "FilterExpression": EXPIRED,
                "ProjectionExpression": ", ".join(f"#k{i}" for i in range(len(keys))),
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": _expired_values(now),
            }
            while True:
                page = self._dynamodb.scan(**scan)
                for key in page.get("Items", []):
                    deleted += self._delete_if_expired(name, key, attribute, now)
                if "LastEvaluatedKey" not in page:
                    break
                scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return deleted

    def _delete_if_expired(self, table: str, key: dict[str, Any], attribute: str, now: int) -> int:
        # Conditional, so an item renewed since the scan survives.
        try:
            self._dynamodb.delete_item(
                TableName=table,
                Key=key,
                ConditionExpression=EXPIRED,
                ExpressionAttributeNames={"#ttl": attribute},
                ExpressionAttributeValues=_expired_values(now),
            )
        except self._dynamodb.exceptions.ConditionalCheckFailedException:
            return 0
        return 1

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                deleted = self.sweep_once()
                if deleted:
                    logger.debug("expired items deleted", extra={"deleted": deleted})
            except Exception as error:  # the next sweep tries again; serving never depends on it
                logger.warning("TTL sweep failed", extra={"reason": str(error)})
            self._stop.wait(self._interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ttl-sweeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
