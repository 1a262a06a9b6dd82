"""An audit record's TTL follows CITEGATE_AUDIT_RETENTION_DAYS: 400 days in AWS unless set, 7 on
the local runtime (its embedded tables hold every record in memory; issue 18)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from citegate.governance.audit import AuditLog, AuditRecord
from citegate.platform.settings import Settings, from_environ


def test_the_retention_defaults_by_runtime_and_can_be_set() -> None:
    assert from_environ(Settings, {"CITEGATE_RUNTIME": "aws"}).audit_ttl_days == 400
    assert from_environ(Settings, {}).audit_ttl_days == 7
    for runtime in ("aws", "local"):
        environ = {"CITEGATE_RUNTIME": runtime, "CITEGATE_AUDIT_RETENTION_DAYS": "90"}
        assert from_environ(Settings, environ).audit_ttl_days == 90
    with pytest.raises(ValueError):
        from_environ(Settings, {"CITEGATE_AUDIT_RETENTION_DAYS": "0"})


def test_a_record_expires_after_the_retention() -> None:
    written: list[dict[str, Any]] = []

    class Table:
        def put_item(self, Item: dict[str, Any]) -> None:
            written.append(Item)

    record = AuditRecord(
        request_id="r",
        timestamp="2026-01-01T00:00:00.000Z",
        tenant_id="t",
        caller_type="service",
        caller_id="c",
        route="GET /x",
    )
    AuditLog(Table(), retention_days=2).write(record)
    assert abs(written[0]["expires_at"] - (time.time() + 2 * 86400)) < 60
