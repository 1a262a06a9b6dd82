"""The ingestion state machine, executed for real by the embedded Step Functions interpreter, one
execution per SQS batch: every step runs, retries fire, a poison document fails alone while a
batch-wide failure takes the catch path, and redelivered messages or retried steps never
duplicate anything. (Supersedes test_workflow.py, written for one execution per document.)"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.knowledge.ingest import steps
from citegate.knowledge.ingest.batch import INLINE_LIMIT_BYTES, BatchState, DocumentRef, batch_id, work_prefix
from citegate.knowledge.schemas.documents import Task
from citegate.platform.dynamo import utc_now
from citegate.runtime.functions import invoke
from tests.integration.conftest import ingest, wait_for_task


def _execution_of(stack: Any, task_id: str) -> str:
    """The ARN of the execution whose batch holds this task."""
    sfn = stack.services.aws.stepfunctions
    arns = [
        e["executionArn"]
        for e in sfn.list_executions(stateMachineArn=stack.services.state_machine_arn)["executions"]
    ]
    for arn in arns:
        documents = json.loads(sfn.describe_execution(executionArn=arn)["input"])["documents"]
        if task_id in {d["task_id"] for d in documents}:
            return str(arn)
    raise AssertionError(f"no execution holds task {task_id}")


def _history(stack: Any, task_id: str) -> list[dict[str, Any]]:
    """The execution's whole history, once it has finished (the task is updated a step earlier)."""
    sfn = stack.services.aws.stepfunctions
    arn = _execution_of(stack, task_id)
    deadline = time.monotonic() + 30
    while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution did not finish"
        time.sleep(0.05)
    events: list[dict[str, Any]] = []
    token = None
    while True:
        page = sfn.get_execution_history(executionArn=arn, **({"nextToken": token} if token else {}))
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def _entered(events: list[dict[str, Any]]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in events if e["type"].endswith("StateEntered")]


def _submit(client: TestClient, kb: str, **body: Any) -> str:
    response = client.post(f"/v1/kb/{kb}/documents", json=body)
    assert response.status_code == 202, response.text
    return str(response.json()["task_id"])


def _sqs_event(*bodies: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": f"m{i}",
                "receiptHandle": f"r{i}",
                "body": body,
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:1:q",
                "awsRegion": "us-east-1",
            }
            for i, body in enumerate(bodies)
        ]
    }


def _executions(stack: Any) -> list[str]:
    sfn = stack.services.aws.stepfunctions
    return [
        e["name"] for e in sfn.list_executions(stateMachineArn=stack.services.state_machine_arn)["executions"]
    ]


def _reopen(s: Any, kb: str, document_id: str) -> DocumentRef:
    """A new, unqueued task for a stored document (as reindex makes), to run steps by hand."""
    record = s.documents.get(kb, document_id)
    now = utc_now()
    task = s.tasks.create(
        Task(
            task_id="t_" + uuid.uuid4().hex,
            kb_id=kb,
            document_id=document_id,
            status="queued",
            created_at=now,
            updated_at=now,
        )
    )
    assert s.documents.update_if_current(kb, document_id, record.task_id, {"task_id": task.task_id})
    return DocumentRef(task_id=task.task_id, kb_id=kb, document_id=document_id)


def _batch(*documents: DocumentRef) -> dict[str, Any]:
    return BatchState(batch_id=batch_id([d.task_id for d in documents]), documents=list(documents)).dump()


def test_the_history_shows_every_step(client: TestClient, kb: str, stack: Any) -> None:
    task_id = _submit(client, kb, text="Steps in order. " * 100, source_name="steps.txt")
    assert wait_for_task(client, task_id)["status"] == "succeeded"
    events = _history(stack, task_id)
    # A batch of documents passes the choice that sends a source's sync to its own task.
    assert _entered(events) == [
        "SourceSyncOrDocuments",
        "Parse",
        "AnyDocumentLeft",
        "Chunk",
        "Embed",
        "Index",
        "Finalize",
    ]
    assert events[-1]["type"] == "ExecutionSucceeded"


def test_documents_submitted_together_share_one_execution(client: TestClient, kb: str, stack: Any) -> None:
    task_ids = [
        _submit(client, kb, text=f"Document {i} is short. " * 40, source_name=f"{i}.txt") for i in range(4)
    ]
    tasks = [wait_for_task(client, t) for t in task_ids]
    assert {t["status"] for t in tasks} == {"succeeded"}
    # Submitted within the batching window, so at most a couple of executions for the four.
    assert len({_execution_of(stack, t) for t in task_ids}) <= 2
    assert stack.services.index.count(kb_id=kb) == sum(t["counts"]["children"] for t in tasks)


def test_a_batch_larger_than_one_execution_is_split(
    client: TestClient, kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citegate.knowledge.ingest import consumer

    monkeypatch.setattr(consumer, "EXECUTION_MAX_DOCUMENTS", 2)
    task_ids = [
        _submit(client, kb, text=f"Split document {i}. " * 30, source_name=f"s{i}.txt") for i in range(5)
    ]
    tasks = [wait_for_task(client, t) for t in task_ids]
    assert {t["status"] for t in tasks} == {"succeeded"}
    executions: dict[str, int] = {}
    for task_id in task_ids:
        arn = _execution_of(stack, task_id)
        executions[arn] = executions.get(arn, 0) + 1
    assert len(executions) >= 3 and max(executions.values()) <= 2


def test_a_step_that_fails_twice_then_succeeds_finishes_the_task(
    client: TestClient, kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    real_embed = steps.embed

    def flaky_embed(s: Any, event: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise ConnectionError("embedding backend blinked")
        return real_embed(s, event)

    monkeypatch.setattr(steps, "embed", flaky_embed)
    task_id = _submit(client, kb, text="Retry me. " * 100, source_name="flaky.txt")
    task = wait_for_task(client, task_id, timeout=30)
    assert task["status"] == "succeeded", task
    assert calls["n"] == 3
    events = _history(stack, task_id)
    failures = [e for e in events if e["type"] in ("LambdaFunctionFailed", "TaskFailed")]
    assert len(failures) == 2, "the history shows both failed attempts before the retry succeeded"
    assert stack.services.index.count(kb_id=kb) == task["counts"]["children"]


def test_a_poison_document_fails_alone_without_retries(client: TestClient, kb: str, stack: Any) -> None:
    poison = base64.b64encode(b"%PDF-1.4\n%%EOF\x00\x01\x02 not really a pdf").decode()
    task_id = _submit(client, kb, base64_file=poison, source_name="poison.pdf")
    task = wait_for_task(client, task_id)
    assert task["status"] == "failed" and "PDF" in task["error"]
    events = _history(stack, task_id)
    left_nothing_to_chunk = ["SourceSyncOrDocuments", "Parse", "AnyDocumentLeft", "Finalize"]
    assert _entered(events) == left_nothing_to_chunk
    assert not [e for e in events if e["type"] in ("LambdaFunctionFailed", "TaskFailed")], "not retried"
    assert events[-1]["type"] == "ExecutionSucceeded"


def test_a_poison_document_in_a_batch_harms_nothing_else(client: TestClient, kb: str, stack: Any) -> None:
    s = stack.services
    good = [ingest(client, kb, text=f"Good text {i}. " * 60, source_name=f"good{i}.txt") for i in range(2)]
    assert {t["status"] for t in good} == {"succeeded"}
    bad = ingest(
        client,
        kb,
        base64_file=base64.b64encode(b"%PDF-1.7\n" + b"\x00junk" * 50).decode(),
        source_name="bad.pdf",
    )
    refs = [_reopen(s, kb, t["document_id"]) for t in [*good, bad]]
    summary = steps.finalize(s, steps.index(s, steps.embed(s, steps.chunk(s, steps.parse(s, _batch(*refs))))))
    assert summary["succeeded"] == [refs[0].task_id, refs[1].task_id]
    assert [f["task_id"] for f in summary["failed"]] == [refs[2].task_id] and "PDF" in summary["failed"][0][
        "error"
    ]
    assert s.tasks.get(refs[2].task_id).status == "failed"
    assert {s.tasks.get(r.task_id).status for r in refs[:2]} == {"succeeded"}
    assert s.index.count(kb_id=kb) == sum(t["counts"]["children"] for t in good)


def test_a_batch_wide_failure_takes_the_catch_path(
    client: TestClient, kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_index(s: Any, event: dict[str, Any]) -> dict[str, Any]:
        raise steps.PermanentStepError("the search index refused the batch")

    monkeypatch.setattr(steps, "index", broken_index)
    task_id = _submit(client, kb, text="Never indexed. " * 60, source_name="never.txt")
    task = wait_for_task(client, task_id)
    assert task["status"] == "failed" and task["error"] == "the search index refused the batch"
    events = _history(stack, task_id)
    assert _entered(events) == [
        "SourceSyncOrDocuments",
        "Parse",
        "AnyDocumentLeft",
        "Chunk",
        "Embed",
        "Index",
        "MarkFailed",
        "Failed",
    ]
    assert events[-1]["type"] == "ExecutionFailed"
    [document] = client.get(f"/v1/kb/{kb}/documents").json()["documents"]
    assert document["status"] == "failed" and document["error"] == task["error"]
    assert stack.services.blobs.delete_prefix("work/") == 0, "no work file is left behind"


def test_a_redelivered_message_starts_no_second_execution(client: TestClient, kb: str, stack: Any) -> None:
    task_id = _submit(client, kb, text="Deliver once. " * 100, source_name="once.txt")
    task = wait_for_task(client, task_id)
    before = stack.services.index.count(kb_id=kb)
    executions = _executions(stack)
    assert invoke("ingest_consumer", _sqs_event(json.dumps({"task_id": task_id}))) == {
        "batchItemFailures": []
    }
    assert _executions(stack) == executions, "a finished task starts nothing"
    assert wait_for_task(client, task_id) == task
    assert stack.services.index.count(kb_id=kb) == before


def test_a_redelivered_batch_finds_its_execution_started(client: TestClient, kb: str, stack: Any) -> None:
    s = stack.services
    done = ingest(client, kb, text="Batch twice. " * 60, source_name="twice.txt")
    ref = _reopen(s, kb, done["document_id"])  # queued, but on no queue: only this test delivers it
    body = json.dumps({"task_id": ref.task_id})
    assert invoke("ingest_consumer", _sqs_event(body)) == {"batchItemFailures": []}
    assert invoke("ingest_consumer", _sqs_event(body)) == {"batchItemFailures": []}
    assert _executions(stack).count(batch_id([ref.task_id])) == 1
    assert wait_for_task(client, ref.task_id)["status"] == "succeeded"
    assert s.index.count(kb_id=kb) == done["counts"]["children"]


def test_a_retried_index_step_creates_no_duplicates(client: TestClient, kb: str, stack: Any) -> None:
    s = stack.services
    done = ingest(client, kb, text="Index twice. " * 200, source_name="twice.txt")
    ref = _reopen(s, kb, done["document_id"])
    event = steps.embed(s, steps.chunk(s, steps.parse(s, _batch(ref))))
    count = s.index.count(kb_id=kb)
    steps.index(s, event)
    steps.finalize(s, steps.index(s, event))
    assert s.index.count(kb_id=kb) == count == done["counts"]["children"]
    assert len(s.parents.list(kb, ref.document_id)) == done["counts"]["parents"]
    assert s.tasks.get(ref.task_id).status == "succeeded"


def test_a_superseded_document_fails_alone_in_its_batch(client: TestClient, kb: str, stack: Any) -> None:
    s = stack.services
    first = ingest(client, kb, text="Kept as is. " * 60, source_name="kept.txt")
    second = ingest(client, kb, text="Replaced soon. " * 60, source_name="replaced.txt")
    refs = [_reopen(s, kb, first["document_id"]), _reopen(s, kb, second["document_id"])]
    event = steps.embed(s, steps.chunk(s, steps.parse(s, _batch(*refs))))
    newer = _reopen(s, kb, second["document_id"])  # a newer ingestion of the same source meanwhile
    summary = steps.finalize(s, steps.index(s, event))
    assert summary["succeeded"] == [refs[0].task_id]
    [failed] = summary["failed"]
    assert failed["task_id"] == refs[1].task_id and newer.task_id in failed["error"]
    assert s.documents.get(kb, second["document_id"]).task_id == newer.task_id


def test_small_batches_travel_inline_and_large_ones_through_work_files(
    client: TestClient, kb: str, stack: Any
) -> None:
    s = stack.services
    small = ingest(client, kb, text="Small. " * 50, source_name="small.txt")
    large = ingest(
        client, kb, text="A longer sentence for a large document. " * 2000, source_name="large.txt"
    )
    ref = _reopen(s, kb, small["document_id"])
    event = steps.chunk(s, steps.parse(s, _batch(ref)))
    assert "inline" in event["chunks"] and not event["work_files"]
    ref = _reopen(s, kb, large["document_id"])
    event = steps.embed(s, steps.chunk(s, steps.parse(s, _batch(ref))))
    assert len(json.dumps(event)) < 3 * INLINE_LIMIT_BYTES, "the payload stays well under 256 KB"
    assert event["chunks"]["key"].startswith(work_prefix(event["batch_id"])) and event["work_files"]
    steps.finalize(s, steps.index(s, event))
    assert s.blobs.delete_prefix(work_prefix(event["batch_id"])) == 0, "finalize removed the work files"
    assert s.tasks.get(ref.task_id).counts.children == large["counts"]["children"]


def test_a_bad_message_is_reported_alone_in_the_batch(stack: Any) -> None:
    good = json.dumps({"task_id": "t_does_not_exist"})
    assert invoke("ingest_consumer", _sqs_event(good, "{not json")) == {
        "batchItemFailures": [{"itemIdentifier": "m1"}]
    }


def test_an_execution_that_cannot_start_retries_only_its_messages(
    stack: Any, kb: str, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = stack.services
    done = ingest(client, kb, text="Start me. " * 60, source_name="start.txt")
    ref = _reopen(s, kb, done["document_id"])

    def refuse(**kwargs: Any) -> Any:
        raise ConnectionError("Step Functions did not answer")

    monkeypatch.setattr(s.aws.stepfunctions, "start_execution", refuse)
    finished = json.dumps({"task_id": done["task_id"]})
    response = invoke("ingest_consumer", _sqs_event(finished, json.dumps({"task_id": ref.task_id})))
    assert response == {"batchItemFailures": [{"itemIdentifier": "m1"}]}, "the finished task is acknowledged"


def test_reingesting_with_fewer_sections_leaves_no_stale_parent(
    client: TestClient, kb: str, stack: Any
) -> None:
    s = stack.services
    sections = [f"# Section {i}\n\n" + f"Section {i} says something at length. " * 90 for i in range(3)]
    first = ingest(client, kb, text="\n\n".join(sections), source_name="sections.md")
    assert first["counts"]["parents"] == 3
    second = ingest(client, kb, text=sections[0], source_name="sections.md")
    assert second["status"] == "succeeded" and second["counts"]["parents"] == 1
    assert len(s.parents.list(kb, first["document_id"])) == 1


def test_on_aws_a_step_reads_and_updates_documents_several_at_once(
    client: TestClient, kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On AWS each per-document call waits on the network, so parse reads raw files and finalize
    updates records several at once; outcomes still come back per document, in order."""
    s = stack.services
    done = [ingest(client, kb, text=f"Read me {i}. " * 60, source_name=f"many{i}.txt") for i in range(5)]
    refs = [_reopen(s, kb, t["document_id"]) for t in done]
    s.aws.s3.delete_object(Bucket=s.bucket, Key=s.documents.get(kb, refs[2].document_id).raw_key)
    monkeypatch.setattr(s.settings, "runtime", "aws")
    threads: set[str] = set()
    real_get, real_update = s.blobs.get, s.documents.update_if_current

    def get(key: str) -> bytes:
        threads.add(threading.current_thread().name)
        time.sleep(0.05)  # a round trip long enough for the calls to overlap
        return real_get(key)

    def update_if_current(*args: Any) -> bool:
        threads.add(threading.current_thread().name)
        time.sleep(0.05)
        return real_update(*args)

    monkeypatch.setattr(s.blobs, "get", get)
    monkeypatch.setattr(s.documents, "update_if_current", update_if_current)
    summary = steps.finalize(s, steps.index(s, steps.embed(s, steps.chunk(s, steps.parse(s, _batch(*refs))))))
    assert len(threads) > 1, "the calls were made from several threads"
    assert summary["succeeded"] == [r.task_id for i, r in enumerate(refs) if i != 2]
    assert [f["task_id"] for f in summary["failed"]] == [refs[2].task_id]
    assert "missing" in summary["failed"][0]["error"]
    assert s.documents.get(kb, refs[2].document_id).status == "failed"
    assert {s.documents.get(kb, r.document_id).status for i, r in enumerate(refs) if i != 2} == {"indexed"}


def test_a_raw_file_read_that_fails_for_want_of_an_answer_retries_the_step(
    client: TestClient, kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = stack.services
    done = [ingest(client, kb, text=f"Try again {i}. " * 60, source_name=f"again{i}.txt") for i in range(3)]
    refs = [_reopen(s, kb, t["document_id"]) for t in done]
    monkeypatch.setattr(s.settings, "runtime", "aws")
    real_get = s.blobs.get

    def get(key: str) -> bytes:
        if key == s.documents.get(kb, refs[1].document_id).raw_key:
            raise ConnectionError("S3 did not answer")
        return real_get(key)

    monkeypatch.setattr(s.blobs, "get", get)
    with pytest.raises(ConnectionError):
        steps.parse(s, _batch(*refs))
    assert {s.tasks.get(r.task_id).status for r in refs} == {"running"}, "nothing failed for good"


def test_a_throttled_step_waits_and_retries_as_the_state_machine_declares(
    client: TestClient, kb: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every environment of the embed step busy (a bulk ingest on a small machine): Lambda answers
    429, Step Functions names it `Lambda.TooManyRequestsException` and the workflow's Retry waits
    for a free environment instead of failing the document."""
    from citegate.runtime import functions

    monkeypatch.setattr(functions, "ENVIRONMENT_WAIT_SECONDS", 0.2)
    embed = functions.pool("ingest_embed")
    held = [embed.acquire() for _ in range(embed.limit)]
    try:
        task_id = _submit(client, kb, text="Throttled, then embedded. " * 40, source_name="throttled.txt")
        arn = None
        deadline = time.monotonic() + 60
        throttled: list[dict[str, Any]] = []
        while not throttled:
            assert time.monotonic() < deadline, "the embed step was never throttled"
            time.sleep(0.1)
            try:
                arn = arn or _execution_of(stack, task_id)
            except AssertionError:
                continue
            history = stack.services.aws.stepfunctions.get_execution_history(executionArn=arn)["events"]
            throttled = [
                e
                for e in history
                if e["type"] == "TaskFailed"
                and e["taskFailedEventDetails"]["error"] == "Lambda.TooManyRequestsException"
            ]
        assert client.get(f"/v1/tasks/{task_id}").json()["status"] not in ("failed", "succeeded")
    finally:
        for environment in held:
            embed.release(environment)
    task = wait_for_task(client, task_id, timeout=120)
    assert task["status"] == "succeeded", task
    assert stack.services.index.count(kb_id=kb) == task["counts"]["children"] > 0
