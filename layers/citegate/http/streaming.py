"""Server-sent event routes: a route validates and authorizes as usual, then hands the entry point
a stream of events instead of a body.

- Errors before the stream starts (bad body, refused caller) are ordinary JSON responses.
- Locally the gateway streams the frames as they are produced. Behind API Gateway's HTTP API a
  Python Lambda cannot stream, so the same frames are sent as one complete `text/event-stream`
  body: clients parse it identically, only without incremental delivery (docs/architecture.md).
- A failure midway becomes the route's own error frames, and the stream still ends cleanly.
- The call's audit record is written when the stream has been produced, before its last frame is
  released; if it cannot be written, the client is told so with an error frame.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.logging import correlation_paths

from citegate.errors import AuditUnavailable, CitegateError, Family, error_code
from citegate.governance import CallRecord, begin_call, end_call
from citegate.http.api import JSON
from citegate.observability import logger, metrics, traced

Event = dict[str, Any]
# Turns a failure (code, message) into the frames a route's clients expect for it.
FailureFrames = Callable[[str, str], list[Event]]

SSE = "text/event-stream"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_frame(event: Event) -> str:
    return f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n"


@dataclass
class PendingStream:
    events: Iterator[Event]
    on_failure: FailureFrames


_pending: ContextVar[PendingStream | None] = ContextVar("citegate_stream", default=None)


def stream_response(events: Iterator[Event], on_failure: FailureFrames) -> Response[str]:
    """What a streaming route returns once the request is accepted: the 200 head; the entry point
    (`sse_handler`) then produces the events."""
    _pending.set(PendingStream(events, on_failure))
    return Response(status_code=200, content_type=SSE, body="", headers=dict(SSE_HEADERS))


def _failure_code(error: Exception, family: Family) -> tuple[str, str, int]:
    if isinstance(error, CitegateError):
        return error_code(error, family), error.message, error.status
    return error_code(CitegateError("internal"), family), f"system error: {type(error).__name__}", 500


def _frames(services: Any, record: CallRecord, pending: PendingStream, family: Family) -> Iterator[str]:
    """The stream's frames. The last event is held back until the audit record is written."""
    held: Event | None = None
    status, error = 200, None
    try:
        for event in pending.events:
            if held is not None:
                yield sse_frame(held)
            held = event
    except Exception as failure:  # a failure midway ends the stream with the route's error frames
        code, message, status = _failure_code(failure, family)
        error = code
        if status >= 500:
            logger.exception("stream failed midway", extra={"code": code})
        if held is not None:
            yield sse_frame(held)
        failure_events = pending.on_failure(code, message)
        held = failure_events.pop() if failure_events else None
        for event in failure_events:
            yield sse_frame(event)
    try:
        end_call(services, record, status, error)
    except AuditUnavailable as failure:
        code = error_code(failure, family)
        failure_events = pending.on_failure(code, failure.message)
        held = failure_events.pop() if failure_events else held
        for event in failure_events:
            yield sse_frame(event)
    if held is not None:
        yield sse_frame(held)


def _in_context(frames: Iterator[str], context: contextvars.Context) -> Iterator[str]:
    """Run every step of the stream in the request's context (call record, principal), whichever
    thread the server pulls the next frame from."""
    while True:
        try:
            yield context.run(next, frames)
        except StopIteration:
            return


def sse_handler(app: APIGatewayHttpResolver, *, family: Family) -> Callable[[dict[str, Any], Any], Any]:
    """The Lambda entry point of a streaming route (compare citegate.http.api.http_handler)."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @traced
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        from citegate.container import services

        s = services()
        record = begin_call(event)
        _pending.set(None)
        response = app.resolve(event, context)
        pending = _pending.get()
        _pending.set(None)
        status = int(response.get("statusCode", 500))
        if pending is None or status != 200:
            return _finish_plain(s, record, response, family)
        frames = _in_context(_frames(s, record, pending, family), contextvars.copy_context())
        if s.settings.local_runtime:
            return frames  # the local gateway streams an iterator as it is produced
        body = "".join(frames)
        return {"statusCode": 200, "headers": {"Content-Type": SSE, **SSE_HEADERS}, "body": body}

    return lambda_handler


def _finish_plain(s: Any, record: CallRecord, response: dict[str, Any], family: Family) -> dict[str, Any]:
    from citegate.errors import error_body

    status = int(response.get("statusCode", 500))
    error = None
    if status >= 400:
        try:
            error = json.loads(response.get("body") or "{}").get("error")
        except (ValueError, AttributeError):
            error = None
    try:
        end_call(s, record, status, error)
    except AuditUnavailable as failure:
        body = error_body(error_code(failure, family), failure.message, record.request_id)
        return {"statusCode": 503, "headers": {"Content-Type": JSON}, "body": json.dumps(body)}
    return response
