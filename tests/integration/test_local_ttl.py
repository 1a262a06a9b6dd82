"""The local stack deletes expired items as DynamoDB's TTL does (moto alone keeps them forever)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from citegate import resources
from citegate.local.ttl import TtlSweeper


def test_expired_items_go_and_the_rest_stay(stack: Any) -> None:
    import boto3

    s = stack.services
    client = boto3.client("dynamodb", region_name=s.settings.region)
    counters = s.counters._table
    now = int(time.time())
    tag = uuid.uuid4().hex
    counters.put_item(Item={"counter_key": f"old-{tag}", "count": 3, "expires_at": now - 10})
    counters.put_item(Item={"counter_key": f"live-{tag}", "count": 3, "expires_at": now + 3600})
    counters.put_item(Item={"counter_key": f"no-ttl-{tag}", "count": 3})
    counters.put_item(Item={"counter_key": f"text-ttl-{tag}", "count": 3, "expires_at": "yesterday"})
    sessions = s.aws.dynamodb.Table(resources.SESSIONS.physical_name(s.settings.stage))
    sessions.put_item(Item={"session_id": f"s-{tag}", "expires_at_epoch": now - 1})

    assert TtlSweeper(client, s.settings.stage, clock=lambda: now).sweep_once() >= 2

    left = {k: "Item" in counters.get_item(Key={"counter_key": f"{k}-{tag}"}) for k in ("old", "live")}
    assert left == {"old": False, "live": True}
    assert "Item" in counters.get_item(Key={"counter_key": f"no-ttl-{tag}"})
    assert "Item" in counters.get_item(Key={"counter_key": f"text-ttl-{tag}"})  # not a number: kept
    assert "Item" not in sessions.get_item(Key={"session_id": f"s-{tag}"})


def test_an_item_renewed_after_the_scan_survives(stack: Any) -> None:
    import boto3

    s = stack.services
    client = boto3.client("dynamodb", region_name=s.settings.region)
    counters = s.counters._table
    key = {"counter_key": f"renewed-{uuid.uuid4().hex}"}
    counters.put_item(Item={**key, "expires_at": int(time.time()) + 3600})
    sweeper = TtlSweeper(client, s.settings.stage)
    # The scan saw it expired, but it was renewed before the delete: the condition keeps it.
    table = resources.COUNTERS.physical_name(s.settings.stage)
    assert sweeper._delete_if_expired(table, {"counter_key": {"S": key["counter_key"]}}, "expires_at", 0) == 0
    assert "Item" in counters.get_item(Key=key)
