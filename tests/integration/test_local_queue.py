"""The embedded endpoint checks SQS retention from the queue's own period instead of building every
queue attribute per message (citegate.runtime.aws_endpoint): a message is delivered while it is
within the period and never after, as on AWS and in moto's own check."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.sqs.models import sqs_backends

LOCAL = {"region_name": "us-east-1", "aws_access_key_id": "test", "aws_secret_access_key": "test"}


def _queue(stack: Any, retention_seconds: int) -> tuple[Any, str, str]:
    sqs = boto3.client("sqs", endpoint_url=stack.aws.endpoint_url, **LOCAL)
    name = f"retention-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": str(retention_seconds)})[
        "QueueUrl"
    ]
    return sqs, url, name


def _age(name: str, seconds: float) -> None:
    """Backdate every message of the queue (moto keeps when each was sent, in milliseconds)."""
    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[name]
    for message in queue._messages:
        message.sent_timestamp = int(message.sent_timestamp) - int(seconds * 1000)


def _received(sqs: Any, url: str) -> list[str]:
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [m["Body"] for m in messages.get("Messages", [])]


def test_a_message_within_the_retention_period_is_delivered(stack: Any) -> None:
    sqs, url, name = _queue(stack, retention_seconds=60)
    sqs.send_message(QueueUrl=url, MessageBody="fresh")
    _age(name, 50)
    assert _received(sqs, url) == ["fresh"]


def test_a_message_past_the_retention_period_is_not(stack: Any) -> None:
    sqs, url, name = _queue(stack, retention_seconds=60)
    sqs.send_message(QueueUrl=url, MessageBody="stale")
    _age(name, 61)
    assert _received(sqs, url) == []


def test_many_waiting_messages_are_all_delivered_ten_at_a_time(stack: Any) -> None:
    sqs, url, _ = _queue(stack, retention_seconds=345600)
    bodies = [f"m{i}" for i in range(35)]
    for start in range(0, len(bodies), 10):
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": b, "MessageBody": b} for b in bodies[start : start + 10]]
        )
    seen: list[str] = []
    while batch := _received(sqs, url):
        assert len(batch) <= 10
        seen += batch
    assert sorted(seen) == sorted(bodies)
