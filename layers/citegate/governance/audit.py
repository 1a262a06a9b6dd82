"""One audit record per call, allowed or refused (spec 000 6.3, spec 002 5.2).

A call whose record cannot be written fails (503 audit_unavailable) instead of passing unrecorded;
calls that change something write a pending record before they act.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, Protocol

from pydantic import BaseModel, Field

from citegate.platform.dynamo import from_item, to_item
from citegate.platform.observability import logger


class AuditRecord(BaseModel):
    request_id: str
    timestamp: str
    tenant_id: str
    caller_type: str
    caller_id: str
    route: str
    tool: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    purpose: str | None = None
    source_ip: str | None = None
    requested_scope: dict[str, Any] | None = None
    effective_scope: dict[str, Any] | None = None
    decision: str = "pending"  # allow | deny | error | pending
    reason: str | None = None  # the error code, for refused and failed calls
    status: int | None = None
    knowledge_bases: list[str] = Field(default_factory=list)
    query: str | None = None
    result_count: int | None = None
    retrieved_chunk_ids: list[str] = Field(default_factory=list)
    cited_chunk_ids: list[str] = Field(default_factory=list)
    latency_ms: float | None = None
    # What became of a question (answer routes) or which report a feedback call made: no personal
    # data, only what the answer said of itself. citegate.governance.signals derives a signal from it.
    outcome: str | None = None  # answered | declined | feedback | improvement_task
    no_answer_code: str | None = None
    confidence: str | None = None  # high | medium | low
    cited_paths: list[str] = Field(default_factory=list)
    nearby_paths: list[str] = Field(default_factory=list)  # the best retrieved pages, cited or not
    answer_request_id: str | None = None  # the answer a feedback call is about
    feedback_record: str | None = None  # the feedback or improvement-task record it counted on

    @property
    def sort_key(self) -> str:
        return f"{self.timestamp}#{self.request_id}"

    @property
    def caller_key(self) -> str:
        return f"{self.tenant_id}#{self.caller_type}:{self.caller_id}"


class SignalSink(Protocol):
    """Where a record's question signal goes (citegate.governance.signals.SignalLog)."""

    def record(self, record: AuditRecord, expires_at: int) -> bool: ...


class AuditLog:
    def __init__(
        self, table: Any, retention_days: float | None = None, signals: SignalSink | None = None
    ) -> None:
        self._table = table
        self._retention_days = retention_days  # unset: the settings' (CITEGATE_AUDIT_RETENTION_DAYS)
        self._signals = signals

    def expires_at(self) -> int:
        """The TTL of a record written now: DynamoDB's TTL (or the local sweeper) deletes it after."""
        days = self._retention_days
        if days is None:
            from citegate.platform.settings import get_settings

            days = get_settings().audit_ttl_days
        return int(time.time() + days * 86400)

    def write(self, record: AuditRecord) -> None:
        item = to_item(record.model_dump())
        expires_at = self.expires_at()
        item.update(sk=record.sort_key, caller_key=record.caller_key, expires_at=expires_at)
        self._table.put_item(Item=item)
        if self._signals is not None:
            # The question's signal (citegate.insights), with the audit record's own retention. Best
            # effort: the audit record is the call's proof; a lost signal only thins the insights.
            try:
                self._signals.record(record, expires_at)
            except Exception:
                logger.exception("insights signal write failed", extra={"request_id": record.request_id})

    def list(
        self,
        tenant_id: str,
        *,
        caller: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        from boto3.dynamodb.conditions import Key  # boto3 is heavy: imported when a list is asked for

        low = since or "0000"
        high = (until or "9999") + "\uffff"
        if caller:
            condition = Key("caller_key").eq(f"{tenant_id}#{caller}") & Key("sk").between(low, high)
            kwargs: dict[str, Any] = {"IndexName": "by_caller", "KeyConditionExpression": condition}
        else:
            kwargs = {"KeyConditionExpression": Key("tenant_id").eq(tenant_id) & Key("sk").between(low, high)}
        response = self._table.query(ScanIndexForward=False, Limit=limit, **kwargs)
        return [AuditRecord.model_validate(_plain(i)) for i in response.get("Items", [])]


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    data = dict(from_item(item))
    for key in ("sk", "caller_key", "expires_at"):
        data.pop(key, None)
    return data


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
