"""What moto would keep for the life of a local server is bounded (issue 18: memory grew without a
plateau): model instances are not listed forever, finished Step Functions executions are pruned,
SQS forgets the oldest receipt handles of deleted messages."""

from __future__ import annotations

import datetime as dt
import gc
import weakref
from types import SimpleNamespace
from typing import Any

from citegate.runtime.aws_endpoint import (
    KEPT_DELETED_RECEIPTS,
    RecentSet,
    _install_memory_bounds,
    prune_executions,
)


def test_moto_objects_are_freed_once_nothing_uses_them() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    _install_memory_bounds()
    item = Item(DynamoType({"S": "k"}), None, {"k": {"S": "k"}, "v": {"N": "1"}})
    copied = __import__("copy").deepcopy(item)  # what moto's UpdateItem does with every item it updates
    gone = weakref.ref(copied)
    assert item not in Item.instances_tracked  # type: ignore[attr-defined]
    del copied
    gc.collect()
    assert gone() is None


def test_only_the_newest_finished_executions_are_kept() -> None:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    finished = [
        SimpleNamespace(name=f"done-{i}", stop_date=start + dt.timedelta(seconds=i)) for i in range(250)
    ]
    running = [SimpleNamespace(name=f"running-{i}", stop_date=None) for i in range(3)]
    executions: list[Any] = [*finished[:100], running[0], *finished[100:], *running[1:]]

    prune_executions(executions, keep=100)

    names = [e.name for e in executions]
    assert [n for n in names if n.startswith("running")] == ["running-0", "running-1", "running-2"]
    assert sorted(n for n in names if n.startswith("done")) == sorted(f"done-{i}" for i in range(150, 250))
    prune_executions(executions, keep=100)  # nothing more to drop
    assert len(executions) == 103


def test_a_queue_remembers_a_bounded_number_of_deleted_receipts() -> None:
    from moto.sqs.models import Queue

    _install_memory_bounds()
    queue = Queue("bounded", "us-east-1", "123456789012")
    assert isinstance(queue.deleted_messages, RecentSet)
    assert queue.deleted_messages.limit == KEPT_DELETED_RECEIPTS

    receipts = RecentSet(limit=1000)
    receipts.update(f"r{i}" for i in range(5000))
    assert len(receipts) == 1000
    assert "r4999" in receipts and "r3999" not in receipts and "r4000" in receipts
    receipts.discard("r4999")
    assert "r4999" not in receipts and len(receipts) == 999
