from __future__ import annotations

from typing import Any

from citegate.knowledge.schemas.documents import Task
from citegate.platform.dynamo import epoch_in, from_item, is_conditional_failure, scan_all, to_item, utc_now
from citegate.platform.errors import TaskNotFound
from citegate.platform.resources import TASK_TTL_DAYS

FINISHED = ("succeeded", "failed")


class TaskStore:
    def __init__(self, table: Any) -> None:
        self._table = table

    def create(self, task: Task) -> Task:
        item = to_item(task.model_dump())
        item["expires_at"] = epoch_in(TASK_TTL_DAYS)
        self._table.put_item(Item=item, ConditionExpression="attribute_not_exists(task_id)")
        return task

    def find(self, task_id: str) -> Task | None:
        item = self._table.get_item(Key={"task_id": task_id}, ConsistentRead=True).get("Item")
        return Task.model_validate(from_item(item)) if item else None

    def get(self, task_id: str) -> Task:
        task = self.find(task_id)
        if task is None:
            raise TaskNotFound(f"task {task_id!r} not found", details={"task_id": task_id})
        return task

    def find_many(self, task_ids: list[str]) -> dict[str, Task]:
        found: dict[str, Task] = {}
        for task_id in task_ids:  # small lists (one per document of a reindex)
            task = self.find(task_id)
            if task:
                found[task_id] = task
        return found

    def update(self, task_id: str, **changes: Any) -> bool:
        """Move a task on; False if it had already finished (a late or repeated step cannot reopen it)."""
        changes["updated_at"] = utc_now()
        status = changes.get("status")
        condition = "attribute_exists(task_id)"
        values: dict[str, Any] = {f":{k}": to_item(v) for k, v in changes.items()}
        if status not in FINISHED:
            condition += " AND NOT #status IN (:succeeded, :failed)"
            values[":succeeded"], values[":failed"] = FINISHED
        names = {f"#{k}": k for k in changes} | {"#status": "status"}
        try:
            self._table.update_item(
                Key={"task_id": task_id},
                UpdateExpression="SET " + ", ".join(f"#{k} = :{k}" for k in changes),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def unfinished(self) -> list[Task]:
        items = scan_all(self._table)
        return [Task.model_validate(i) for i in items if i.get("status") not in FINISHED]
