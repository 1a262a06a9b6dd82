"""Scheduled syncs: the sources whose schedule is due, synced one after another and audited.

What EventBridge Scheduler runs every few minutes in AWS (the `source_scheduler` function,
infra/constructs/sources.py) and the local scheduler inside `citegate serve` every 30 seconds
(citegate.runtime.scheduler). A source is due when it is enabled, has `schedule_minutes`, and its
`next_sync_at` has passed; a sync sets the next one. A due source's sync is requested as the API
requests one (the lease taken, a run `queued` on the ingestion queue, which hands it to the sync
function), so a pass takes seconds however large the sources. A source another sync holds (its
lease) is left for the next pass. Each request writes one audit record, the caller being the
scheduler.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Protocol

from citegate.governance.audit import AuditLog, AuditRecord, now_iso
from citegate.knowledge.sources.ports import Syncing
from citegate.platform.errors import CitegateError
from citegate.platform.observability import logger, metrics

if TYPE_CHECKING:
    from citegate.knowledge.sources.model import Source
    from citegate.knowledge.sources.service import SourceService

SCHEDULER = "scheduler"
ROUTE = "SCHEDULE /v1/kb/{kb_id}/sources/{source_id}/sync"
# A pass stops starting syncs this long before its deadline (a Lambda's remaining time).
MARGIN_SECONDS = 120.0


class Scheduling(Syncing, Protocol):
    """What a sync reads and writes, the source service, and the audit log."""

    @property
    def source_service(self) -> SourceService: ...

    @property
    def audit(self) -> AuditLog: ...


def due(s: Syncing, now: str | None = None) -> list[Source]:
    return due_now(s, s.sources.all(), now)


def due_now(s: Syncing, sources: list[Source], now: str | None = None) -> list[Source]:
    moment = now or now_iso()
    return [
        source
        for source in sources
        if source.enabled
        and source.schedule_minutes is not None
        and source.next_sync_at is not None
        and source.next_sync_at <= moment
    ]


def run_due_sources(s: Scheduling, *, seconds_left: float | None = None) -> dict[str, Any]:
    """Sync every due source (until `seconds_left` runs short); what each became."""
    started = time.monotonic()
    outcomes: list[dict[str, Any]] = []
    for source in due(s):
        if seconds_left is not None and time.monotonic() - started > seconds_left - MARGIN_SECONDS:
            break  # the next pass takes the rest
        # Read again: a pass that overlaps this one (a slow pass, the next schedule) may have synced it.
        fresh = s.sources.find(source.kb_id, source.source_id)
        if fresh is None or fresh not in due_now(s, [fresh]):
            continue
        kb = s.kbs.find(source.kb_id)
        if kb is None:
            continue
        request_id = "sched-" + uuid.uuid4().hex
        began = time.perf_counter()
        record = AuditRecord(
            request_id=request_id,
            timestamp=now_iso(),
            tenant_id=kb.tenant_id,
            caller_type="service",
            caller_id=SCHEDULER,
            route=ROUTE,
            tool="rag_sync_source",
            knowledge_bases=[kb.kb_id],
            purpose=f"scheduled sync of source {source.source_id}",
        )
        outcome: dict[str, Any] = {"kb_id": kb.kb_id, "source_id": source.source_id}
        try:
            run = s.source_service.request_sync(kb, source.source_id, trigger="schedule", caller=SCHEDULER)
            outcome.update(run_id=run.run_id, status=run.status)
            record.decision, record.status = "allow", 202
        except CitegateError as error:  # sync_in_progress: another run holds the source
            outcome.update(status="skipped", error=error.kind)
            record.decision, record.status, record.reason = "deny", error.status, error.kind
            if error.status >= 500:  # the queue refused it
                metrics.add_metric(name="SourceSyncsFailed", unit="Count", value=1)
        except Exception as error:
            logger.exception("scheduled sync failed", extra={"source_id": source.source_id})
            outcome.update(status="failed", error=str(error))
            record.decision, record.status, record.reason = "error", 500, "internal_error"
            metrics.add_metric(name="SourceSyncsFailed", unit="Count", value=1)
        record.latency_ms = round((time.perf_counter() - began) * 1000, 1)
        s.audit.write(record)
        outcomes.append(outcome)
    return {"synced": outcomes}
