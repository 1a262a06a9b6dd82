"""The ingestion queue's consumer: the documents of an SQS batch packed into workflow executions.

Each execution embeds all of its documents in one Lambda call, so documents are packed by count
and by stored size (`pack`): many small ones share an execution, and a large one goes alone. An
execution is named after its tasks (`batch.batch_id`), so a redelivered batch finds its
executions already started. Tasks that have finished (an earlier delivery did them) or no
longer exist are acknowledged without starting anything. Each message's outcome is reported on
its own (Powertools partial batch response): a malformed message fails alone, and if the
execution cannot be started, only the messages it would have run are retried.

A source sync requested over the API or by the schedule comes on the same queue as
`{"source_sync": {"kb_id", "source_id", "run_id"}}`: it starts one execution of the same state
machine, named after the run (so a redelivery finds it started), whose first state sends it to
the sync function (citegate.knowledge.sources); the sync then queues its documents here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from citegate.knowledge.ingest import ledger
from citegate.knowledge.ingest.batch import BatchState, DocumentRef, batch_id
from citegate.platform.observability import logger

if TYPE_CHECKING:
    from citegate.knowledge.ports import Starting

# The queue's event source, here and in infra/constructs/ingestion.py: up to BATCH_SIZE messages,
# gathered for at most BATCHING_WINDOW_SECONDS, make one consumer call.
BATCH_SIZE = 100
BATCHING_WINDOW_SECONDS = 1
# One execution at most: every execution costs the same fixed calls (five Lambda tasks, the work
# files), so more documents share them; the size cap keeps one embed step well inside Lambda's
# 15 minutes (2 MB of text is ~7,000 children: ~35 s with the default embedder, ~8 min with e5).
EXECUTION_MAX_DOCUMENTS = 50
EXECUTION_MAX_BYTES = 2 * 1024 * 1024


SYNC_KEY = "source_sync"
SYNC_FIELDS = ("kb_id", "source_id", "run_id")


def sync_of(message_body: str) -> dict[str, str] | None:
    """The source sync a message asks for, or None when it is not a sync message."""
    try:
        body = json.loads(message_body)
    except (TypeError, ValueError):
        return None
    sync = body.get(SYNC_KEY) if isinstance(body, dict) else None
    if not isinstance(sync, dict) or not all(isinstance(sync.get(f), str) and sync[f] for f in SYNC_FIELDS):
        return None
    return {f: str(sync[f]) for f in SYNC_FIELDS}


def message_key(message_body: str) -> str:
    """What a message's outcome is kept under: its task id, or `sync:<run id>`."""
    sync = sync_of(message_body)
    return f"sync:{sync['run_id']}" if sync else task_id_of(message_body)


def task_id_of(message_body: str) -> str:
    """The task a message names; ValueError for a malformed message."""
    try:
        task_id = json.loads(message_body)["task_id"]
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"not an ingestion message: {message_body[:100]!r}") from error
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"not an ingestion message: {message_body[:100]!r}")
    return task_id


@dataclass
class StartedBatch:
    """What happened to each task of one SQS batch."""

    outcomes: dict[str, str] = field(default_factory=dict)  # task id -> what happened
    error: Exception | None = None  # why the execution could not be started

    def outcome(self, message_body: str) -> str:
        """One message's outcome; raises (so the message is retried) if its task was not started."""
        key = message_key(message_body)
        if key in self.outcomes:
            return self.outcomes[key]
        raise RuntimeError(f"the ingestion of {key} could not be started: {self.error}")


def pack(
    documents: list[DocumentRef],
    sizes: dict[str, int],
    max_documents: int = EXECUTION_MAX_DOCUMENTS,
    max_bytes: int = EXECUTION_MAX_BYTES,
) -> list[list[DocumentRef]]:
    """Documents in their queue order, cut into executions of at most `max_documents` documents
    and `max_bytes` stored bytes (`sizes` by task id); a document larger than that goes alone."""
    packs: list[list[DocumentRef]] = []
    current: list[DocumentRef] = []
    current_bytes = 0
    for document in documents:
        size = sizes.get(document.task_id, 0)
        if current and (len(current) >= max_documents or current_bytes + size > max_bytes):
            packs.append(current)
            current, current_bytes = [], 0
        current.append(document)
        current_bytes += size
    if current:
        packs.append(current)
    return packs


def start_batch(s: Starting, message_bodies: list[str]) -> StartedBatch:
    """Start executions for the unfinished tasks among the messages (see `pack`)."""
    task_ids: list[str] = []
    started = StartedBatch()
    for body in message_bodies:
        sync = sync_of(body)
        if sync is not None:
            _start_sync(s, sync, started)
            continue
        try:
            task_ids.append(task_id_of(body))
        except ValueError:
            continue  # reported as that message's failure by `StartedBatch.outcome`
    try:
        tasks = ledger.find_tasks(s, task_ids)
        documents = ledger.find_documents(
            s, [(t.kb_id, t.document_id) for t in tasks.values() if t.document_id is not None]
        )
    except Exception as error:  # DynamoDB did not answer: every message is retried
        logger.exception("could not read the batch's tasks")
        started.error = error
        return started
    pending: list[DocumentRef] = []
    sizes: dict[str, int] = {}
    for task_id in dict.fromkeys(task_ids):
        task = tasks.get(task_id)
        if task is None or task.document_id is None:
            logger.warning("queued task no longer exists", extra={"task_id": task_id})
            started.outcomes[task_id] = "missing"
        elif task.status in ("succeeded", "failed"):
            started.outcomes[task_id] = "finished"
        else:
            pending.append(DocumentRef(task_id=task_id, kb_id=task.kb_id, document_id=task.document_id))
            record = documents.get((task.kb_id, task.document_id))
            sizes[task_id] = record.size_bytes if record else 0
    for documents_of_one in pack(pending, sizes, EXECUTION_MAX_DOCUMENTS, EXECUTION_MAX_BYTES):
        _start_execution(s, documents_of_one, started)
    return started


def _start_execution(s: Starting, documents: list[DocumentRef], started: StartedBatch) -> None:
    """One execution for `documents`; if it cannot be started, only their messages are retried."""
    name = batch_id([d.task_id for d in documents])
    state = BatchState(batch_id=name, documents=documents)
    outcome = _start(s, name, state.dump(), started, "the ingestion workflow", {"batch_id": name})
    if outcome is None:
        return
    for document in documents:
        started.outcomes[document.task_id] = outcome
    logger.info("ingestion batch " + outcome, extra={"batch_id": name, "documents": len(documents)})


def _start_sync(s: Starting, sync: dict[str, str], started: StartedBatch) -> None:
    """One execution for a source sync, named after its run; if it cannot be started, its message
    is retried."""
    run_id = sync["run_id"]
    outcome = _start(s, run_id, {SYNC_KEY: sync}, started, "the source sync", {"run_id": run_id})
    if outcome is None:
        return
    started.outcomes[f"sync:{run_id}"] = outcome
    logger.info("source sync " + outcome, extra=sync)


def _start(
    s: Starting, name: str, payload: dict[str, Any], started: StartedBatch, what: str, extra: dict[str, Any]
) -> str | None:
    """Start the execution `name` ("started", or "already-started" for a redelivery); None, with
    the error kept on `started`, when it could not be started."""
    sfn = s.aws.stepfunctions
    try:
        sfn.start_execution(stateMachineArn=s.state_machine_arn, name=name, input=json.dumps(payload))
    except sfn.exceptions.ExecutionAlreadyExists:
        return "already-started"
    except Exception as error:
        logger.exception(f"could not start {what}", extra=extra)
        started.error = error
        return None
    return "started"
