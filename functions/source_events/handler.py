"""S3 events of the buckets the sources follow (EventBridge rules, infra/constructs/sources.py):
each created or removed object under an `s3` source's prefix is ingested or deleted at once, in
the order of its sequencer (citegate.knowledge.sources.events). An error is raised so that Lambda
retries the event; the source's schedule catches anything still missed."""

from typing import Any

from citegate.container import services
from citegate.platform.observability import logged, traced


@logged
@traced
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from citegate.knowledge.sources.events import apply_events, object_events

    return {"applied": apply_events(services(), object_events(event))}
