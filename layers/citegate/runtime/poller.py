"""What a Lambda event source mapping does in AWS: poll SQS, invoke the consumer with a batch,
and delete only the messages that the consumer did not report as failed.

Like the mapping's MaximumBatchingWindowInSeconds, a batch is gathered for up to `batching_window`
seconds (or until it holds `batch_size` messages), so documents submitted one by one still reach
the workflow as batches.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from citegate.knowledge.ingest.consumer import BATCH_SIZE, BATCHING_WINDOW_SECONDS
from citegate.platform.observability import logger
from citegate.runtime.functions import invoke

SQS_RECEIVE_MAX = 10  # ReceiveMessage returns at most 10 messages per call


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


class QueuePoller:
    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        function: str,
        region: str,
        batch_size: int = BATCH_SIZE,
        batching_window: float = BATCHING_WINDOW_SECONDS,
    ) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._function = function
        self._region = region
        self._batch_size = batch_size
        self._batching_window = batching_window
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]

    def _receive(self, wait_seconds: int) -> list[dict[str, Any]]:
        """Up to batch_size messages: the first long poll waits `wait_seconds`; once one message
        is in, the rest of the batching window gathers more."""
        messages: list[dict[str, Any]] = []
        deadline = 0.0
        while len(messages) < self._batch_size:
            remaining = deadline - time.monotonic()
            if messages and (remaining <= 0 or self._stop.is_set()):
                break
            received = self._sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=min(SQS_RECEIVE_MAX, self._batch_size - len(messages)),
                # A long poll returns as soon as a message is there; it may overrun the window by < 1 s.
                WaitTimeSeconds=wait_seconds if not messages else int(remaining >= 1),
                AttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                if not received:
                    return []
                deadline = time.monotonic() + self._batching_window
            messages += received
            if not received and remaining < 1:
                self._stop.wait(min(0.2, max(0.0, deadline - time.monotonic())))
        return messages

    def poll_once(self, wait_seconds: int = 1) -> int:
        messages = self._receive(wait_seconds)
        if not messages:
            return 0
        try:
            response = invoke(self._function, sqs_event(messages, self._queue_arn, self._region)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception:
            logger.exception("queue consumer failed; the whole batch will be redelivered")
            return 0
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), SQS_RECEIVE_MAX):  # DeleteMessageBatch takes 10 at most
            self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + SQS_RECEIVE_MAX])
                ],
            )
        return len(messages)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.poll_once() == 0:
                    self._stop.wait(0.05)
            except Exception:
                if self._stop.is_set():
                    return
                logger.exception("polling the ingestion queue failed")
                time.sleep(1)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"poller-{self._function}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
