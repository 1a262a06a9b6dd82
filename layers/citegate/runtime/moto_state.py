"""The embedded endpoint's DynamoDB items and S3 objects as journal records, and back.

The journal (citegate.runtime.journal) records each DynamoDB write by what it left behind: after
moto has applied it, and before any other write can run (the journal's lock), every item the
write named is read back and journaled whole (`item`), or as gone (`del`). Such a record means the
same whatever came before it, so

- the journal is compacted by keeping the last record of each item (citegate.runtime.compaction),
  from the file alone, while the server keeps writing: moto's state is never read for it;
- a record is restored by putting the item into moto's table directly, about 40 times faster than
  sending the request through moto again (moto checks an item's size attribute by attribute, at
  every attribute it adds, and parses each request through its HTTP layer).

S3 writes stay journaled as requests (rare, and some have no simple effect to record); a
compaction records the bucket's objects as they are (`object`), and those are restored directly
too. Requests journaled before this format (or a DynamoDB write whose items cannot be named, which
moto would have refused) are replayed through moto as before.

Record shapes (one JSON object per line; key order matters, compaction reads only their heads):
    {"t": "item", "table": name, "k": key, "item": {attribute: DynamoDB JSON}}
    {"t": "del", "table": name, "k": key}
    {"t": "object", "bucket": name, "key": object key, "blob": sha256, "meta": {header: value}}
`k` is the item's key as JSON, `[partition value, sort value or null]` in DynamoDB JSON, with numbers
written one way, so that the same item always has the same `k`.

Relies on moto internals (pinned, covered by tests/integration/test_local_journal_compaction.py):
the backends' dictionaries, `Table.items` and its key attributes, `Item` and `DynamoType`'s
fields, and S3's `bucket_accounts`, `keys` and `put_object`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import weakref
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

from citegate.runtime.journal import Journal, UnusableBlob

ITEM = "item"
DELETED = "del"
OBJECT = "object"


def _canonical(wire: dict[str, Any] | None) -> dict[str, Any] | None:
    if wire and "N" in wire:
        try:
            return {"N": format(Decimal(str(wire["N"])).normalize(), "f")}
        except InvalidOperation:
            return wire
    return wire


def key_string(partition: dict[str, Any], sort: dict[str, Any] | None) -> str:
    return json.dumps([_canonical(partition), _canonical(sort)], separators=(",", ":"))


def wire(value: Any) -> dict[str, Any]:
    """A moto DynamoType as DynamoDB JSON (binary as base64), without moto's deep copies."""
    if isinstance(value, dict):  # moto left a nested value as it came
        return value
    kind, inner = value.type, value.value
    if kind == "L":
        return {"L": [wire(v) for v in inner]}
    if kind == "M":
        return {"M": {k: wire(v) for k, v in inner.items()}}
    if isinstance(inner, bytes | bytearray):
        return {kind: base64.b64encode(inner).decode()}
    if kind == "BS" and inner and isinstance(inner[0], bytes | bytearray):
        return {kind: [base64.b64encode(v).decode() for v in inner]}
    return {kind: inner}


def _typed(value: dict[str, Any]) -> Any:
    """DynamoDB JSON as the DynamoType moto builds from it (moto's constructor, minus its overhead)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    typed = object.__new__(DynamoType)
    [(kind, inner)] = value.items()
    if kind == "L":
        inner = [_typed(v) for v in inner]
    elif kind == "M":
        inner = {k: _typed(v) for k, v in inner.items()}
    typed.type = kind
    typed.value = inner
    return typed


def _typed_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """An item's attributes as DynamoTypes; plain values without a call each (most are)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    typed: dict[str, Any] = {}
    for name, value in attributes.items():
        [(kind, inner)] = value.items()
        if kind == "L" or kind == "M":
            typed[name] = _typed(value)
        else:
            scalar = object.__new__(DynamoType)
            scalar.type = kind
            scalar.value = inner
            typed[name] = scalar
    return typed


# --- DynamoDB ------------------------------------------------------------------------------------


def _dynamodb_backends() -> Iterator[Any]:
    from moto.dynamodb.models import dynamodb_backends

    for regions in list(dynamodb_backends.values()):
        yield from list(regions.values())


def find_table(name: str) -> Any:
    """moto's table of that name (or ARN), looked up afresh each time (moto may replace a table)."""
    if name.startswith("arn:"):
        name = name.split(":table/", 1)[-1]
    for backend in _dynamodb_backends():
        table = backend.tables.get(name)
        if table is not None:
            return table
    return None


def items_of(table: Any) -> list[Any]:
    """A table's items as they are now. Each list() copies a dict without running Python code, so
    no other thread changes it midway (iterating it could fail: "dictionary changed size")."""
    groups = list(table.items.values())
    if table.range_key_attr:
        return [item for group in groups for item in list(group.values())]
    return groups


def _named_items(operation: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """(table, attributes holding the item's key) for every item a write names; None: not a write
    whose items can be named."""
    if operation == "PutItem":
        return [(body["TableName"], body["Item"])]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(body["TableName"], body["Key"])]
    if operation == "BatchWriteItem":
        named: list[tuple[str, dict[str, Any]]] = []
        for table, requests in body["RequestItems"].items():
            for request in requests:
                if "PutRequest" in request:
                    named.append((table, request["PutRequest"]["Item"]))
                else:
                    named.append((table, request["DeleteRequest"]["Key"]))
        return named
    if operation == "TransactWriteItems":
        named = []
        for action in body["TransactItems"]:
            [(kind, detail)] = action.items()
            if kind == "Put":
                named.append((detail["TableName"], detail["Item"]))
            elif kind in ("Update", "Delete"):
                named.append((detail["TableName"], detail["Key"]))
        return named
    return None


def item_record(table_name: str, table: Any, item: Any) -> dict[str, Any]:
    partition = wire(item.hash_key)
    sort = wire(item.range_key) if item.range_key is not None else None
    return {
        "t": ITEM,
        "table": table_name,
        "k": key_string(partition, sort),
        "item": {name: wire(value) for name, value in item.attrs.items()},
    }


def item_images(operation: str, body: bytes) -> list[dict[str, Any]] | None:
    """What a DynamoDB write moto has just applied left behind: one record per item it names.
    Called with the journal's lock held, so no other write has run since. None when the items
    cannot be named (the request is then journaled as it is)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    try:
        named = _named_items(operation, json.loads(body))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if named is None:
        return None
    records: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for table_name, attributes in named:
        table = find_table(table_name)
        if table is None:
            return None
        name = table.name
        try:
            partition = attributes[table.hash_key_attr]
            sort = attributes[table.range_key_attr] if table.range_key_attr else None
        except (KeyError, TypeError):
            return None
        key = key_string(partition, sort)
        if (name, key) in seen:
            continue
        seen.add((name, key))
        found = table.get_item(DynamoType(partition), DynamoType(sort) if sort is not None else None)
        if found is None:
            records.append({"t": DELETED, "table": name, "k": key})
        else:
            records.append(item_record(name, table, found))
    return records


def table_records() -> Iterator[dict[str, Any]]:
    """Every item of every table, as it is now (a full snapshot: moto must not change meanwhile)."""
    for backend in _dynamodb_backends():
        for name, table in list(backend.tables.items()):
            for item in items_of(table):
                yield item_record(name, table, item)


def _load_item(record: dict[str, Any], tables: dict[str, Any] | None = None) -> None:
    from moto.dynamodb.models.dynamo_type import Item, LimitedSizeDict

    name = record["table"]
    table = tables.get(name) if tables is not None else None
    if table is None:
        table = find_table(name)
        if table is None:
            raise LookupError(f"no table {name}")
        if tables is not None:
            tables[name] = table
    attributes = record["item"]
    typed = LimitedSizeDict.__new__(LimitedSizeDict)
    # Bypasses LimitedSizeDict's size check at every attribute (as moto's own deep copy does): the
    # item passed it when it was written.
    dict.update(typed, _typed_attributes(attributes))
    item: Any = Item.__new__(Item)
    item.hash_key = _typed(attributes[table.hash_key_attr])
    if table.range_key_attr:
        item.range_key = _typed(attributes[table.range_key_attr])
        item.attrs = typed
        table.items[item.hash_key][item.range_key] = item
    else:
        item.range_key = None
        item.attrs = typed
        table.items[item.hash_key] = item


def _delete_item(record: dict[str, Any]) -> None:
    table = find_table(record["table"])
    if table is None:
        return
    partition, sort = json.loads(record["k"])
    table.delete_item(_typed(partition), _typed(sort) if sort is not None else None)


# --- S3 --------------------------------------------------------------------------------------------


def _buckets() -> Iterator[tuple[str, Any]]:
    from moto.s3.models import s3_backends

    for name, (partition, account) in list(s3_backends.bucket_accounts.items()):
        bucket = s3_backends[account][partition].buckets.get(name)
        if bucket is not None:
            yield name, bucket


class ObjectDigests:
    """The SHA-256 of each S3 object's body, remembered per moto object (an overwrite makes a new
    one), so a compaction hashes only the objects written since the one before."""

    def __init__(self) -> None:
        self._digests: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def of(self, fake_key: Any, journal: Journal) -> str:
        digest = self._digests.get(fake_key)
        if digest is None:
            body = bytes(fake_key.value)
            digest = hashlib.sha256(body).hexdigest()
            journal.store_blob(body, digest)
            self._digests[fake_key] = digest
        return digest


def object_records(journal: Journal, digests: ObjectDigests) -> Iterator[dict[str, Any]]:
    """Every object of every bucket as it is now (its latest version), its body in the blob folder."""
    for bucket_name, bucket in _buckets():
        for key, versions in list(dict.items(bucket.keys)):
            if not versions:
                continue
            fake_key = versions[-1]
            if getattr(fake_key, "is_delete_marker", False) or not hasattr(fake_key, "value"):
                continue
            yield {
                "t": OBJECT,
                "bucket": bucket_name,
                "key": key,
                "blob": digests.of(fake_key, journal),
                "meta": dict(fake_key.metadata),
            }


def _load_object(record: dict[str, Any], journal: Journal) -> None:
    from moto.s3.models import s3_backends

    bucket = record["bucket"]
    if bucket not in s3_backends.bucket_accounts:
        raise LookupError(f"no bucket {bucket}")
    partition, account = s3_backends.bucket_accounts[bucket]
    body = journal.body_of(record)
    fake_key = s3_backends[account][partition].put_object(
        bucket, record["key"], body, disable_notification=True
    )
    fake_key.set_metadata(dict(record.get("meta") or {}))


# --- restore -----------------------------------------------------------------------------------------


class Loader:
    """Restores journal records of the shapes above directly into moto (replay's `load` hook);
    anything else is left to be replayed as a request. Counts what it did.

    With `last` (each item's last record: (table, key) -> its index among the records), an item's
    earlier records are passed over: the last one states its whole value."""

    def __init__(self, journal: Journal, last: dict[tuple[str, str], int] | None = None) -> None:
        self.journal = journal
        self.last = last
        self.index = -1
        self.loaded = 0
        self.superseded = 0
        self.skipped = 0
        self.requests = 0  # records left to replay as requests
        self.dynamodb_requests = 0
        self._tables: dict[str, Any] = {}  # by name, while restoring (tables do not change meanwhile)

    def _superseded(self, record: dict[str, Any]) -> bool:
        return self.last is not None and self.last.get((record["table"], record["k"])) != self.index

    def __call__(self, record: dict[str, Any]) -> bool:
        from citegate.platform.observability import logger

        self.index += 1
        kind = record.get("t")
        if kind is None:
            self.requests += 1
            if record.get("service") == "dynamodb":
                self.dynamodb_requests += 1
            return False
        if kind in (ITEM, DELETED) and self._superseded(record):
            self.superseded += 1
            return True
        try:
            if kind == ITEM:
                _load_item(record, self._tables)
            elif kind == DELETED:
                _delete_item(record)
            elif kind == OBJECT:
                _load_object(record, self.journal)
            else:
                raise ValueError(f"unknown record {kind!r}")
        except (UnusableBlob, LookupError, ValueError, KeyError, TypeError) as error:
            self.skipped += 1
            where = record.get("table") or f"{record.get('bucket')}/{record.get('key')}"
            logger.warning(f"journal: skipped {kind} {where}: {error}")
            return True
        self.loaded += 1
        return True
