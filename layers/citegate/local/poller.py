"""What a Lambda event source mapping does in AWS: poll SQS, invoke the consumer with a batch,
and delete only the messages that the consumer did not report as failed."""

from __future__ import annotations

import threading
import time
from typing import Any

from citegate.local.functions import invoke
from citegate.observability import logger


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
    def __init__(self, sqs: Any, queue_url: str, function: str, region: str, batch_size: int = 10) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._function = function
        self._region = region
        self._batch_size = batch_size
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]

    def poll_once(self, wait_seconds: int = 1) -> int:
        messages = self._sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=self._batch_size,
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0
        try:
            response = invoke(self._function, sqs_event(messages, self._queue_arn, self._region)) or {}
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        except Exception:
            logger.exception("queue consumer failed; the whole batch will be redelivered")
            return 0
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
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
