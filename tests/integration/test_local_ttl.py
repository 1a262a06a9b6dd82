"""The local stack deletes expired items as DynamoDB's TTL does (moto alone keeps them forever)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from citegate.platform import resources
from citegate.runtime.ttl import TtlSweeper


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

    from citegate.governance.audit import AuditRecord, now_iso
    from citegate.platform.settings import get_settings, reset_settings

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


def test_a_backlog_goes_a_hundred_at_a_time_and_a_renewed_item_still_survives(stack: Any) -> None:
    """One delete a call fell behind 16 busy clients and the audit table grew without end: expired
    items now go in TransactWriteItems of a hundred conditional deletes. When one item of a call
    was renewed since it was read, the call is cancelled and its items go one at a time."""
    import boto3

    s = stack.services
    client = boto3.client("dynamodb", region_name=s.settings.region)
    calls: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    counters = s.counters._table
    table = resources.COUNTERS.physical_name(s.settings.stage)
    now = int(time.time())
    tag = uuid.uuid4().hex
    with counters.batch_writer() as batch:
        for i in range(250):
            batch.put_item(Item={"counter_key": f"backlog-{tag}-{i}", "expires_at": now - 5})

    assert TtlSweeper(client, s.settings.stage, clock=lambda: now).sweep_once() >= 250
    assert calls.count("TransactWriteItems") == 3  # 100 + 100 + 50, not 250 calls
    assert not any("Item" in counters.get_item(Key={"counter_key": f"backlog-{tag}-{i}"}) for i in range(250))

    renewed = {"counter_key": {"S": f"renewed-{tag}"}}
    expired = [{"counter_key": {"S": f"gone-{tag}-{i}"}} for i in range(3)]
    counters.put_item(Item={"counter_key": f"renewed-{tag}", "expires_at": now + 3600})
    for key in expired:
        counters.put_item(Item={"counter_key": key["counter_key"]["S"], "expires_at": now - 5})
    sweeper = TtlSweeper(client, s.settings.stage, clock=lambda: now)
    assert sweeper._delete_expired(table, [*expired, renewed], "expires_at", now) == 3
    assert "Item" in counters.get_item(Key={"counter_key": f"renewed-{tag}"})
    assert not any("Item" in counters.get_item(Key={"counter_key": k["counter_key"]["S"]}) for k in expired)


def test_past_the_local_bound_the_oldest_audit_records_move_to_the_archive(stack: Any, tmp_path: Any) -> None:
    """The embedded endpoint holds every item in memory: locally the audit table keeps at most
    CITEGATE_LOCAL_AUDIT_MAX_RECORDS records, and the oldest beyond it move to
    audit-archive/<day>.jsonl, one record a line; an archive day past the retention is removed."""
    import json

    import boto3

    from citegate.governance.audit import AuditRecord
    from citegate.runtime import moto_state
    from citegate.runtime.ttl import AuditOverflow

    s = stack.services
    client = boto3.client("dynamodb", region_name=s.settings.region)
    audit_table = resources.AUDIT.physical_name(s.settings.stage)
    tag = uuid.uuid4().hex[:8]
    for i in range(3):  # the oldest records of the table, from long ago
        s.audit.write(
            AuditRecord(
                request_id=f"old-{tag}-{i}",
                timestamp=f"2000-01-01T00:00:0{i}.000Z",
                tenant_id=f"archive-{tag}",
                caller_type="service",
                caller_id="archive-test",
                route="GET /v1/kb",
                decision="allow",
                status=200,
            )
        )
    held = len(moto_state.items_of(moto_state.find_table(audit_table)))
    # (kept 30 years, or the sweep would remove the year-2000 archive at once, as it does below)
    overflow = AuditOverflow(tmp_path / "audit-archive", max_records=held - 3, retention_days=30 * 365)
    TtlSweeper(client, s.settings.stage, audit_overflow=overflow).sweep_once()

    archived = [
        json.loads(line)
        for line in (tmp_path / "audit-archive" / "2000-01-01.jsonl").read_text().splitlines()
    ]
    assert [r["request_id"] for r in archived] == [f"old-{tag}-{i}" for i in range(3)]
    assert archived[0]["status"] == 200 and archived[0]["route"] == "GET /v1/kb"  # plain JSON, whole
    assert s.audit.list(f"archive-{tag}") == []  # gone from the table

    today = tmp_path / "audit-archive" / (time.strftime("%Y-%m-%d", time.gmtime()) + ".jsonl")
    today.write_text("{}\n")
    week = AuditOverflow(tmp_path / "audit-archive", max_records=held, retention_days=7)
    assert week.remove_expired_days(time.time()) == 1  # 2000-01-01 went; today stays
    assert sorted(p.name for p in (tmp_path / "audit-archive").iterdir()) == [today.name]
