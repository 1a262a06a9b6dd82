"""The ingestion state machine, executed for real by the embedded Step Functions interpreter:
every step runs, retries fire, a poison document takes the catch path, and redelivered messages
or retried steps never duplicate anything."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.ingest import steps
from citegate.local.functions import invoke
from tests.integration.conftest import wait_for_task


def _history(stack: Any, task_id: str) -> list[dict[str, Any]]:
    """The execution's whole history, once it has finished (the task is updated a step earlier)."""
    sfn = stack.services.aws.stepfunctions
    execution_arn = stack.services.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{task_id}"
    deadline = time.monotonic() + 30
    while sfn.describe_execution(executionArn=execution_arn)["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution did not finish"
        time.sleep(0.05)
    events: list[dict[str, Any]] = []
    token = None
    while True:
        page = sfn.get_execution_history(
            executionArn=execution_arn, **({"nextToken": token} if token else {})
        )
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


def test_the_history_shows_every_step(client: TestClient, kb: str, stack: Any) -> None:
    task_id = _submit(client, kb, text="Steps in order. " * 100, source_name="steps.txt")
    assert wait_for_task(client, task_id)["status"] == "succeeded"
    events = _history(stack, task_id)
    assert _entered(events) == ["Parse", "Chunk", "Embed", "Index", "Finalize"]
    assert events[-1]["type"] == "ExecutionSucceeded"


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


def test_a_poison_document_takes_the_catch_path(client: TestClient, kb: str, stack: Any) -> None:
    poison = base64.b64encode(b"%PDF-1.4\n%%EOF\x00\x01\x02 not really a pdf").decode()
    task_id = _submit(client, kb, base64_file=poison, source_name="poison.pdf")
    task = wait_for_task(client, task_id)
    assert task["status"] == "failed" and task["error"]
    events = _history(stack, task_id)
    assert _entered(events) == ["Parse", "MarkFailed", "Failed"], "a permanent error is not retried"
    assert events[-1]["type"] == "ExecutionFailed"


def test_a_redelivered_message_starts_no_second_execution(client: TestClient, kb: str, stack: Any) -> None:
    task_id = _submit(client, kb, text="Deliver once. " * 100, source_name="once.txt")
    task = wait_for_task(client, task_id)
    before = stack.services.index.count(kb_id=kb)
    body = json.dumps({"task_id": task_id})
    event = {
        "Records": [
            {
                "messageId": "m1",
                "receiptHandle": "r1",
                "body": body,
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:1:q",
                "awsRegion": "us-east-1",
            }
        ]
    }
    assert invoke("ingest_consumer", event) == {"batchItemFailures": []}
    sfn = stack.services.aws.stepfunctions
    executions = sfn.list_executions(stateMachineArn=stack.services.state_machine_arn)["executions"]
    assert [e["name"] for e in executions].count(task_id) == 1
    assert wait_for_task(client, task_id) == task
    assert stack.services.index.count(kb_id=kb) == before


def test_a_retried_index_step_creates_no_duplicates(client: TestClient, kb: str, stack: Any) -> None:
    task_id = _submit(client, kb, text="Index twice. " * 200, source_name="twice.txt")
    wait_for_task(client, task_id)
    s = stack.services
    record = s.documents.list(kb)[0]
    payload = {"task_id": task_id, "kb_id": kb, "document_id": record.document_id}
    # Re-run the steps as a retry would (the work files are gone after finalize, so rebuild them).
    event = steps.embed(s, steps.chunk(s, steps.parse(s, payload)))
    count = s.index.count(kb_id=kb)
    steps.index(s, event)
    steps.index(s, event)
    assert s.index.count(kb_id=kb) == count
    assert len(s.parents.list(kb, record.document_id)) == record.counts.parents


def test_a_bad_message_is_reported_alone_in_the_batch(stack: Any) -> None:
    good = json.dumps({"task_id": "t_does_not_exist"})
    records = [
        {"messageId": "ok", "receiptHandle": "r1", "body": good},
        {"messageId": "bad", "receiptHandle": "r2", "body": "{not json"},
    ]
    for record in records:
        record.update(
            {
                "attributes": {},
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:1:q",
                "awsRegion": "us-east-1",
            }
        )
    assert invoke("ingest_consumer", {"Records": records}) == {
        "batchItemFailures": [{"itemIdentifier": "bad"}]
    }
