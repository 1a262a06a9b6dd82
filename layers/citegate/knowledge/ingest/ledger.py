"""Batched data access for a workflow batch: records read with one BatchGetItem per 100 keys, task
status changes and every document's parents written with one BatchWriteItem per 25 items.

Task records are written only by the workflow once created, so a task's change is a read and a
put of the whole item (DynamoDB has no batched conditional update); a finished task is never
reopened. Document records can be replaced by a new submission at any time, so their changes
stay conditional UpdateItems (`DocumentStore.update_if_current`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Key

from citegate.knowledge.schemas.documents import DocumentRecord, Task
from citegate.knowledge.store.parents import doc_key
from citegate.platform import resources
from citegate.platform.dynamo import batch_get, from_item, query_all, to_item, utc_now

if TYPE_CHECKING:
    from citegate.platform.ports import Tables


def find_tasks(s: Tables, task_ids: Iterable[str]) -> dict[str, Task]:
    keys = [{"task_id": t} for t in dict.fromkeys(task_ids)]
    items = batch_get(s.table(resources.TASKS), keys, consistent=True) if keys else []
    return {str(item["task_id"]): Task.model_validate(from_item(item)) for item in items}


FINISHED = ("succeeded", "failed")


def update_tasks(s: Tables, changes: dict[str, dict[str, Any]], *, reopen: bool = False) -> set[str]:
    """Apply each task's changes (a None value removes the attribute); returns the task ids
    changed. Missing tasks are skipped, and so are finished ones unless `reopen`."""
    if not changes:
        return set()
    table = s.table(resources.TASKS)
    items = {
        str(i["task_id"]): i for i in batch_get(table, [{"task_id": t} for t in changes], consistent=True)
    }
    now = utc_now()
    changed: set[str] = set()
    with table.batch_writer(overwrite_by_pkeys=["task_id"]) as batch:
        for task_id, change in changes.items():
            item = items.get(task_id)
            if item is None or (item.get("status") in FINISHED and not reopen):
                continue
            for name, value in {**change, "updated_at": now}.items():
                if value is None:
                    item.pop(name, None)
                else:
                    item[name] = to_item(value)
            batch.put_item(Item=item)
            changed.add(task_id)
    return changed


def find_documents(s: Tables, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
    unique = [{"kb_id": kb, "document_id": doc} for kb, doc in dict.fromkeys(keys)]
    items = batch_get(s.table(resources.DOCUMENTS), unique, consistent=True) if unique else []
    records = [DocumentRecord.model_validate(from_item(item)) for item in items]
    return {(r.kb_id, r.document_id): r for r in records}


def replace_parents(
    s: Tables, parents_by_document: dict[tuple[str, str], list[dict[str, Any]]], new: set[tuple[str, str]]
) -> None:
    """`ParentStore.replace` for a whole batch: one query per document that was indexed before
    finds its stale parents (documents in `new` have none), then one BatchWriteItem per 25 writes
    puts and deletes them for every document together."""
    table = s.table(resources.PARENTS)
    writes: list[tuple[str, dict[str, Any]]] = []
    for (kb_id, document_id), parents in parents_by_document.items():
        key = doc_key(kb_id, document_id)
        keep = {p["parent_id"] for p in parents}
        existing = (
            []
            if (kb_id, document_id) in new
            else query_all(
                table, KeyConditionExpression=Key("doc_key").eq(key), ProjectionExpression="parent_id"
            )
        )
        writes += [("put", to_item({**p, "doc_key": key})) for p in parents]
        writes += [
            ("delete", {"doc_key": key, "parent_id": e["parent_id"]})
            for e in existing
            if e["parent_id"] not in keep
        ]
    with table.batch_writer(overwrite_by_pkeys=["doc_key", "parent_id"]) as batch:
        for kind, item in writes:
            if kind == "put":
                batch.put_item(Item=item)
            else:
                batch.delete_item(Key=item)
