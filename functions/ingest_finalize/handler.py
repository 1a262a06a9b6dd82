"""Ingestion workflow step: finalize (see citegate/knowledge/ingest/steps.py)."""

from citegate.container import services
from citegate.knowledge.ingest.handlers import step_handler

lambda_handler = step_handler("finalize", services)
