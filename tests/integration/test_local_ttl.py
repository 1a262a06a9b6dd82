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


def test_audit_records_go_once_their_retention_has_passed(stack: Any, monkeypatch: Any) -> None:
    """Audit records carry a TTL of CITEGATE_AUDIT_RETENTION_DAYS (7 days locally by default, not
    the 400 of AWS): the sweeper deletes them after it, so a long-running server's audit table
    stops growing."""
    import boto3

    from citegate.audit import AuditRecord, now_iso
    from citegate.settings import get_settings, reset_settings

    s = stack.services
    client = boto3.client("dynamodb", region_name=s.settings.region)
    table = s.aws.dynamodb.Table(resources.AUDIT.physical_name(s.settings.stage))
    tenant = f"ttl-{uuid.uuid4().hex[:8]}"

    def record(request_id: str) -> AuditRecord:
        return AuditRecord(
            request_id=request_id,
            timestamp=now_iso(),
            tenant_id=tenant,
            caller_type="service",
            caller_id="ttl-test",
            route="GET /v1/kb",
            decision="allow",
        )

    assert get_settings().audit_ttl_days == 7  # the local default
    s.audit.write(record("default"))
    monkeypatch.setenv("CITEGATE_AUDIT_RETENTION_DAYS", "0.5")
    reset_settings()
    try:
        s.audit.write(record("half-a-day"))
    finally:
        monkeypatch.delenv("CITEGATE_AUDIT_RETENTION_DAYS")
        reset_settings()
    now = time.time()
    items = {
        i["request_id"]: int(i["expires_at"])
        for i in table.query(
            KeyConditionExpression="tenant_id = :t", ExpressionAttributeValues={":t": tenant}
        )["Items"]
    }
    assert abs(items["default"] - (now + 7 * 86400)) < 120
    assert abs(items["half-a-day"] - (now + 43200)) < 120

    def left(clock: float) -> set[str]:
        TtlSweeper(client, s.settings.stage, clock=lambda: clock).sweep_once()
        found = table.query(
            KeyConditionExpression="tenant_id = :t", ExpressionAttributeValues={":t": tenant}
        )["Items"]
        return {i["request_id"] for i in found}

    assert left(now + 3600) == {"default", "half-a-day"}
    # (not further: the session's other audit records would go too)
    assert left(now + 43200 + 120) == {"default"}
