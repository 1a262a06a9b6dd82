"""The ingestion queue's consumer: start one workflow execution per task.

The execution is named after the task, so a redelivered message cannot start a second one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from citegate.observability import logger

if TYPE_CHECKING:
    from citegate.container import Services


def start_ingestion(s: Services, message_body: str) -> str:
    """Start (or find already started) the execution for one queued task; returns what happened."""
    task_id = json.loads(message_body)["task_id"]
    task = s.tasks.find(task_id)
    if task is None:
        logger.warning("queued task no longer exists", extra={"task_id": task_id})
        return "missing"
    if task.status in ("succeeded", "failed"):
        return "finished"
    payload = {"task_id": task.task_id, "kb_id": task.kb_id, "document_id": task.document_id}
    sfn = s.aws.stepfunctions
    try:
        sfn.start_execution(stateMachineArn=s.state_machine_arn, name=task_id, input=json.dumps(payload))
    except sfn.exceptions.ExecutionAlreadyExists:
        return "already-started"
    return "started"
