"""The sync function: one queued source sync (a run the API or the schedule recorded `queued`),
started by the ingestion queue's consumer as an execution of the ingestion state machine. It lists
the source, queues new and changed documents on the ingestion queue, deletes what is gone, and
records the run's end (citegate.knowledge.sources.sync). A failed run counts SourceSyncsFailed."""

from typing import Any

from citegate.container import services
from citegate.platform.observability import logged, metrics, traced


@logged
@traced
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    sync = event["source_sync"]
    run = services().source_service.execute(sync["kb_id"], sync["source_id"], sync["run_id"])
    if run is None:
        return {"run_id": sync["run_id"], "status": "not-run"}
    if run.status == "failed":
        metrics.add_metric(name="SourceSyncsFailed", unit="Count", value=1)
    return {"run_id": run.run_id, "status": run.status, "counts": run.counts.model_dump()}
