"""The local event source mapping: batches gathered over a window, failed messages left on the queue."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from citegate.runtime import poller as poller_module
from citegate.runtime.poller import QueuePoller


class FakeSqs:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.delete_calls = 0
        self.sent = 0
        self.lock = threading.Lock()

    def send(self, n: int) -> None:
        with self.lock:
            ids = range(self.sent, self.sent + n)
            self.messages += [{"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": "{}"} for i in ids]
            self.sent += n

    def get_queue_attributes(self, **_: Any) -> dict[str, Any]:
        return {"Attributes": {"QueueArn": "arn:aws:sqs:us-east-1:1:q"}}

    def receive_message(self, *, MaxNumberOfMessages: int, **_: Any) -> dict[str, Any]:
        with self.lock:
            taken, self.messages = self.messages[:MaxNumberOfMessages], self.messages[MaxNumberOfMessages:]
        return {"Messages": taken}

    def delete_message_batch(self, *, Entries: list[dict[str, str]], **_: Any) -> None:
        assert len(Entries) <= 10
        self.delete_calls += 1
        self.deleted += [e["ReceiptHandle"] for e in Entries]


def test_a_batch_is_gathered_over_the_window_and_failures_stay_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sqs = FakeSqs()
    batches: list[list[str]] = []

    def consumer(function: str, event: dict[str, Any]) -> dict[str, Any]:
        ids = [r["messageId"] for r in event["Records"]]
        batches.append(ids)
        return {"batchItemFailures": [{"itemIdentifier": ids[0]}]}

    monkeypatch.setattr(poller_module, "invoke", consumer)
    poller = QueuePoller(sqs, "url", "ingest_consumer", "us-east-1", batch_size=25, batching_window=0.5)
    sqs.send(3)
    threading.Timer(0.2, sqs.send, args=(19,)).start()  # arrives within the window
    assert poller.poll_once(wait_seconds=0) == 22
    assert batches == [[f"m{i}" for i in range(22)]]
    assert len(sqs.deleted) == 21 and "r0" not in sqs.deleted, "the failed message is redelivered later"
    assert sqs.delete_calls == 3, "DeleteMessageBatch takes ten at most"


def test_a_full_batch_does_not_wait_for_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    sqs = FakeSqs()
    monkeypatch.setattr(poller_module, "invoke", lambda function, event: {"batchItemFailures": []})
    poller = QueuePoller(sqs, "url", "ingest_consumer", "us-east-1", batch_size=10, batching_window=60)
    sqs.send(12)
    started = time.monotonic()
    assert poller.poll_once(wait_seconds=0) == 10
    assert time.monotonic() - started < 30, "a full batch goes at once, whatever the window"
    assert len(sqs.messages) == 2 and len(sqs.deleted) == 10
