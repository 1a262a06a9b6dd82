"""Ingestion workflow step: parse (see citegate/ingest/steps.py)."""

from citegate.ingest.handlers import step_handler

lambda_handler = step_handler("parse")
