"""SQS consumer: one Step Functions execution per queued task, with partial batch failures."""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from citegate.container import services
from citegate.ingest.consumer import start_ingestion
from citegate.observability import logger, traced

processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    return start_ingestion(services(), record.body)


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
