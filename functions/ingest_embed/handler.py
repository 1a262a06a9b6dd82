"""Ingestion workflow step: embed (see citegate/ingest/steps.py)."""

from typing import Any

from citegate.container import services
from citegate.ingest import steps
from citegate.observability import logger, traced


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return steps.embed(services(), event)
