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

import contextlib
import contextvars
import json
from collections.abc import Callable, Generator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging import correlation_paths

from citegate.errors import AuditUnavailable, CitegateError, Family, error_code
from citegate.http.api import finish_call
from citegate.observability import logger, metrics, traced

if TYPE_CHECKING:  # imported on first use, as in citegate.http.api (cold start)
    from aws_lambda_powertools.event_handler import Response

    from citegate.governance import CallRecord
    from citegate.http.api import LazyResolver

Event = dict[str, Any]
# Turns a failure (code, message) into the frames a route's clients expect for it.
FailureFrames = Callable[[str, str], list[Event]]

SSE = "text/event-stream"
# The status nginx made common for "the client closed the request"; recorded in the audit only.
CLIENT_CLOSED = 499
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
    from aws_lambda_powertools.event_handler import Response

    _pending.set(PendingStream(events, on_failure))
    return Response(status_code=200, content_type=SSE, body="", headers=dict(SSE_HEADERS))


def _failure_code(error: Exception, family: Family) -> tuple[str, str, int]:
    if isinstance(error, CitegateError):
        return error_code(error, family), error.message, error.status
    return error_code(CitegateError("internal"), family), f"system error: {type(error).__name__}", 500


def _frames(
    services: Any, record: CallRecord, pending: PendingStream, family: Family
) -> Generator[str, None, None]:
    """The stream's frames. The last event is held back until the audit record is written."""
    from citegate.governance import end_call

    held: Event | None = None
    status, error = 200, None
    try:
        for event in pending.events:
            if held is not None:
                yield sse_frame(held)
            held = event
    except GeneratorExit:
        # The client went away: the route's own generator is closed (so it can record what it had
        # produced), and the call is still audited, as a request the client closed.
        close = getattr(pending.events, "close", None)
        if close is not None:
            close()
        with contextlib.suppress(AuditUnavailable):
            end_call(services, record, CLIENT_CLOSED, "client_closed_request")
        raise
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


def _in_context(frames: Generator[str, None, None], context: contextvars.Context) -> Iterator[str]:
    """Run every step of the stream in the request's context (call record, principal), whichever
    thread the server pulls the next frame from; closing it closes the stream in that context too."""
    try:
        while True:
            try:
                frame = context.run(next, frames)
            except StopIteration:
                return
            yield frame
    finally:
        context.run(frames.close)


def sse_handler(app: LazyResolver, *, family: Family) -> Callable[[dict[str, Any], Any], Any]:
    """The Lambda entry point of a streaming route (compare citegate.http.api.http_handler)."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @traced
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        from citegate.container import services
        from citegate.governance import begin_call

        s = services()
        record = begin_call(event)
        _pending.set(None)
        response = app.resolve(event, context)
        pending = _pending.get()
        _pending.set(None)
        status = int(response.get("statusCode", 500))
        if pending is None or status != 200:
            return finish_call(s, record, response, family)
        frames = _in_context(_frames(s, record, pending, family), contextvars.copy_context())
        if s.settings.local_runtime:
            return frames  # the local gateway streams an iterator as it is produced
        body = "".join(frames)
        return {"statusCode": 200, "headers": {"Content-Type": SSE, **SSE_HEADERS}, "body": body}

    return lambda_handler
