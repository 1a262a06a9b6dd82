"""EventBridge Scheduler's target (and the local scheduler's): sync the sources whose schedule is due.

Each due source's sync is queued (a run `queued` on the ingestion queue) for the sync function,
which queues its new and changed documents on the same queue, where the ingestion
workflow takes them, and deletes what is gone; each is audited (citegate.api.scheduled)."""

from typing import Any

from citegate.container import services
from citegate.platform.observability import logged, metrics, traced


@logged
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from citegate.api.scheduled import run_due_sources

    remaining = getattr(context, "get_remaining_time_in_millis", None)
    seconds_left = remaining() / 1000 if callable(remaining) else None
    return run_due_sources(services(), seconds_left=seconds_left)
