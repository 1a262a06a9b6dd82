"""SQS consumer: one Step Functions execution per batch of queued tasks, with partial batch failures."""

from typing import Any

from citegate.container import services
from citegate.platform.observability import logged, traced


@logged
@traced
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # Imported on the first event, not with the handler: powertools' batch utility, boto3 and pydantic
    # would take most of a second of the cold start (the bar is 300 ms).
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from citegate.knowledge.ingest.consumer import start_batch

    # The whole batch starts as one execution; then each message reports its own outcome.
    started = start_batch(services(), [record["body"] for record in event.get("Records", [])])

    def record_handler(record: SQSRecord) -> str:
        return started.outcome(record.body)

    return dict(
        process_partial_response(
            event=event,
            record_handler=record_handler,
            processor=BatchProcessor(event_type=EventType.SQS),
            context=context,
        )
    )
