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
against 0.03 s read here. They are deleted a hundred at a time (one TransactWriteItems of
conditional deletes): one at a time, a sweeper sharing the process with 16 busy clients deleted
fewer records a second than the clients wrote, and the audit table grew for as long as they ran.

The embedded endpoint holds every item in memory, about 5 KB an audit record, so a week of audit
records would grow with the traffic. Locally the audit table also keeps at most
`CITEGATE_LOCAL_AUDIT_MAX_RECORDS` records (AuditOverflow): the oldest beyond it move to
`audit-archive/<day>.jsonl` under the data folder, one record a line, and those files are removed
once the retention has passed. Nothing is lost and memory stays bounded.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from citegate.platform import resources
from citegate.platform.observability import logger

SWEEP_INTERVAL_SECONDS = 60.0
# TransactWriteItems' limit: deletes go a hundred to a call (a conditional delete each).
DELETES_PER_CALL = 100
# Only numbers expire (as in AWS); the type test first also spares moto comparing a string with a
# number, which it cannot. `#ttl` is the table's TTL attribute.
EXPIRED = "attribute_type(#ttl, :number) AND #ttl < :now"


def _expired_values(now: int) -> dict[str, Any]:
    return {":now": {"N": str(now)}, ":number": {"S": "N"}}


def _expired_in_process(name: str, keys: list[str], attribute: str, now: int) -> list[dict[str, Any]] | None:
    """The keys of `name`'s items whose `attribute` is a number below `now`, read from moto's table
    in this process; None when the table is not in this process (then a Scan finds them). What
    is read may be a moment old: the delete checks again."""
    from citegate.runtime import moto_state

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


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True)
class AuditOverflow:
    """The local bound on the audit table: past `max_records`, the oldest records are archived to
    `folder/<day>.jsonl` (the day of their timestamp) and deleted; archive days older than
    `retention_days` are removed, as their records would have expired."""

    folder: Path
    max_records: int
    retention_days: float

    def oldest_beyond_bound(self, table_name: str) -> list[Any]:
        """moto's items past the bound, oldest first (the sort key starts with the timestamp)."""
        from citegate.runtime import moto_state

        table = moto_state.find_table(table_name)
        if table is None:
            return []
        items = moto_state.items_of(table)
        excess = len(items) - self.max_records
        if excess <= 0:
            return []
        sort_key = resources.AUDIT.sort_key or ""
        items.sort(key=lambda item: str(item.attrs[sort_key].value) if sort_key in item.attrs else "")
        return items[:excess]

    def archive(self, records: list[dict[str, Any]]) -> None:
        """Append records (DynamoDB JSON) to their day's file, as plain JSON lines."""
        from boto3.dynamodb.types import TypeDeserializer

        from citegate.platform.dynamo import from_item

        self.folder.mkdir(parents=True, exist_ok=True)
        by_day: dict[str, list[str]] = {}
        deserialize = TypeDeserializer().deserialize
        for record in records:
            plain = from_item({name: deserialize(value) for name, value in record.items()})
            day = str(plain.get("timestamp", ""))[:10] or "undated"
            by_day.setdefault(day, []).append(json.dumps(plain, ensure_ascii=False, sort_keys=True))
        for day, lines in by_day.items():
            with (self.folder / f"{day}.jsonl").open("a", encoding="utf-8") as archive:
                archive.write("\n".join(lines) + "\n")

    def remove_expired_days(self, now: float) -> int:
        if not self.folder.is_dir():
            return 0
        cutoff = dt.datetime.fromtimestamp(now - self.retention_days * 86400, dt.UTC).date().isoformat()
        removed = 0
        for path in self.folder.glob("*.jsonl"):
            if path.stem < cutoff:  # a whole day older than the retention: every record has expired
                path.unlink(missing_ok=True)
                removed += 1
        return removed


class TtlSweeper:
    def __init__(
        self,
        dynamodb: Any,
        stage: str,
        interval: float = SWEEP_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
        audit_overflow: AuditOverflow | None = None,
    ) -> None:
        self._dynamodb = dynamodb  # a boto3 client on the embedded endpoint
        self._audit_table = resources.AUDIT.physical_name(stage)
        self._audit_overflow = audit_overflow
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
                deleted += self._delete_expired(name, expired, attribute, now)
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
                deleted += self._delete_expired(name, page.get("Items", []), attribute, now)
                if "LastEvaluatedKey" not in page:
                    break
                scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        if self._audit_overflow is not None:
            deleted += self._archive_audit_overflow()
            self._audit_overflow.remove_expired_days(now)
        return deleted

    def _delete_expired(self, table: str, keys: list[dict[str, Any]], attribute: str, now: int) -> int:
        """Delete these items if they are still expired, a hundred to a call; a call that one
        renewed item cancels is retried one item at a time."""
        deleted = 0
        for chunk in _chunks(keys, DELETES_PER_CALL):
            if len(chunk) == 1:
                deleted += self._delete_if_expired(table, chunk[0], attribute, now)
                continue
            condition = {
                "ConditionExpression": EXPIRED,
                "ExpressionAttributeNames": {"#ttl": attribute},
                "ExpressionAttributeValues": _expired_values(now),
            }
            try:
                self._dynamodb.transact_write_items(
                    TransactItems=[{"Delete": {"TableName": table, "Key": key, **condition}} for key in chunk]
                )
            except self._dynamodb.exceptions.TransactionCanceledException:
                deleted += sum(self._delete_if_expired(table, key, attribute, now) for key in chunk)
            else:
                deleted += len(chunk)
        return deleted

    def _archive_audit_overflow(self) -> int:
        """Archive and delete the audit records beyond the local bound (oldest first)."""
        from citegate.runtime import moto_state

        assert self._audit_overflow is not None
        overflow = self._audit_overflow.oldest_beyond_bound(self._audit_table)
        if not overflow:
            return 0
        records = [{name: moto_state.wire(value) for name, value in item.attrs.items()} for item in overflow]
        # Archived first: a crash between the two leaves a record in both places, never in neither.
        self._audit_overflow.archive(records)
        names = [resources.AUDIT.partition_key, resources.AUDIT.sort_key or ""]
        keys = [{name: record[name] for name in names} for record in records]
        for chunk in _chunks(keys, 25):  # BatchWriteItem's limit
            requests = [{"DeleteRequest": {"Key": key}} for key in chunk]
            pending: dict[str, Any] = {self._audit_table: requests}
            while pending:
                pending = self._dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        return len(keys)

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
