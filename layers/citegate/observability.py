"""Powertools Logger, Metrics and Tracer shared by every handler.

The Tracer is built on a handler's first invocation, not at import: constructing it imports the
X-Ray SDK and botocore (about a second on a busy machine), which would dominate every handler's
import time. It switches itself off outside Lambda.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics

# A request that records no metric of its own is normal here, not worth a warning per call.
warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service="citegate")
metrics = Metrics(namespace="citegate", service="citegate")

_tracer: Any = None
_tracer_lock = threading.Lock()

Handler = Callable[[dict[str, Any], Any], Any]


def tracer() -> Any:
    global _tracer
    with _tracer_lock:
        if _tracer is None:
            from aws_lambda_powertools import Tracer

            _tracer = Tracer(service="citegate")
        return _tracer


def traced(handler: Handler) -> Handler:
    """`Tracer.capture_lambda_handler`, applied when the handler first runs."""
    wrapped: Handler | None = None

    @functools.wraps(handler)
    def run(event: dict[str, Any], context: Any) -> Any:
        nonlocal wrapped
        if wrapped is None:
            wrapped = tracer().capture_lambda_handler(handler)
        return wrapped(event, context)

    return run
