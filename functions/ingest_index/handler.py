"""Ingestion workflow step: index (see citegate/ingest/steps.py)."""

from citegate.ingest.handlers import step_handler

lambda_handler = step_handler("index")
