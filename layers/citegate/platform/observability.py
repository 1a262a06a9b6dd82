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


_cold = True


def logged(handler: Handler) -> Handler:
    """What `Logger.inject_lambda_context` adds to every log line (the function, the invocation,
    the cold start, and API Gateway's request id as the correlation id), kept per request.

    Powertools' decorator appends those keys to the formatter, which every thread of a process
    shares: two events served at once by two local execution environments would log under each
    other's ids. These keys live in Powertools' context-variable keys instead (`thread_safe_*`),
    set when the event arrives and cleared when the handler returns; a stream's frames keep the
    copy taken with the request's context (citegate.api.streaming)."""

    @functools.wraps(handler)
    def run(event: dict[str, Any], context: Any) -> Any:
        global _cold
        cold, _cold = _cold, False
        keys: dict[str, Any] = {
            "function_name": getattr(context, "function_name", None),
            "function_request_id": getattr(context, "aws_request_id", None),
            "cold_start": cold,
        }
        request_context = event.get("requestContext") if isinstance(event, dict) else None
        if isinstance(request_context, dict) and request_context.get("requestId"):
            keys["correlation_id"] = request_context["requestId"]
        logger.thread_safe_clear_keys()
        logger.thread_safe_append_keys(**keys)
        try:
            return handler(event, context)
        finally:
            logger.thread_safe_clear_keys()

    return run
