"""Powertools Logger, Tracer and Metrics shared by every handler.

Constructing them does no I/O; the Tracer switches itself off outside Lambda.
"""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer

# A request that records no metric of its own is normal here, not worth a warning per call.
warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service="citegate")
tracer = Tracer(service="citegate")
metrics = Metrics(namespace="citegate", service="citegate")
