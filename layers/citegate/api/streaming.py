"""Server-sent event routes: a route validates and authorizes as usual, then hands the entry point
a stream of events instead of a body.

- Errors before the stream starts (bad body, refused caller) are ordinary JSON responses.
- An entry point that can deliver frames as they are produced gets the stream itself: the local
  gateway, and in AWS the streaming entry (citegate.api.stream_app: the function URL with
  RESPONSE_STREAM behind the Lambda Web Adapter), which says so with `delivering_frames()`.
  Behind API Gateway's HTTP API (which cannot stream) the same frames are sent as one complete
  `text/event-stream` body: clients parse it identically, only without incremental delivery and
  within the API's 29 s (docs/architecture.md, "Streaming in AWS").
- A failure midway becomes the route's own error frames, and the stream still ends cleanly.
- The call's audit record is written when the stream has been produced, before its last frame is
  released; if it cannot be written, the client is told so with an error frame. A client that
  goes away is noticed by the reader, which closes the stream: the call is then audited once, on
  the request's own path, as closed by the client (EventStream).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from citegate.api.http import admit_event, checked, finish_call
from citegate.platform.errors import AuditUnavailable, CitegateError, Family, error_code, error_status
from citegate.platform.observability import logged, logger, metrics, traced

if TYPE_CHECKING:  # imported on first use, as in citegate.api.http (cold start)
    from aws_lambda_powertools.event_handler import Response

    from citegate.api.http import LazyResolver, ServicesFactory
    from citegate.governance.calls import CallRecord

# A frame's JSON object; or its data verbatim (OpenAI's closing `data: [DONE]` is not JSON).
Event = dict[str, Any] | str
# Turns a failure (code, message) into the frames a route's clients expect for it.
FailureFrames = Callable[[str, str], Sequence[Event]]

SSE = "text/event-stream"
# The status nginx made common for "the client closed the request"; recorded in the audit only.
CLIENT_CLOSED = 499
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_frame(event: Event) -> str:
    if isinstance(event, str):
        return f"data: {event}\n\n"
    return f"data: {json.dumps(event, ensure_ascii=False, default=str)}\n\n"


@dataclass
class PendingStream:
    events: Iterator[Event]
    on_failure: FailureFrames
    # What the route keeps when the client goes away (a chat stores the part it was shown).
    on_disconnect: Callable[[], None] | None = None


_pending: ContextVar[PendingStream | None] = ContextVar("citegate_stream", default=None)
# Set by an entry point that delivers each frame as it is produced (citegate.api.stream_app).
_delivers_frames: ContextVar[bool] = ContextVar("citegate_delivers_frames", default=False)


@contextlib.contextmanager
def delivering_frames() -> Iterator[None]:
    """Within it, a streaming route's entry point returns its `EventStream` for the caller to
    deliver frame by frame (and close), instead of joining the frames into one body."""
    token = _delivers_frames.set(True)
    try:
        yield
    finally:
        _delivers_frames.reset(token)


def stream_response(
    events: Iterator[Event], on_failure: FailureFrames, on_disconnect: Callable[[], None] | None = None
) -> Response[str]:
    """What a streaming route returns once the request is accepted: the 200 head; the entry point
    (`sse_handler`) then produces the events. `events` must not write anything when it is closed
    early (its cleanup may run in a garbage collector's thread): that belongs in `on_disconnect`,
    which runs on the request's own path."""
    from aws_lambda_powertools.event_handler import Response

    _pending.set(PendingStream(events, on_failure, on_disconnect))
    return Response(status_code=200, content_type=SSE, body="", headers=dict(SSE_HEADERS))


def _failure_code(error: Exception, family: Family) -> tuple[str, str, int]:
    if isinstance(error, CitegateError):
        return error_code(error, family), error.message, error_status(error, family)
    return error_code(CitegateError("internal"), family), f"system error: {type(error).__name__}", 500


def _frames(
    services: Any, record: CallRecord, pending: PendingStream, family: Family
) -> Generator[str, None, None]:
    """The stream's frames. The last event is held back until the audit record is written.

    Closing this generator early writes nothing (see EventStream.close)."""
    from citegate.governance.calls import end_call

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
        failure_events = list(pending.on_failure(code, message))
        held = failure_events.pop() if failure_events else None
        for event in failure_events:
            yield sse_frame(event)
    try:
        end_call(services, record, status, error)
    except AuditUnavailable as failure:
        code = error_code(failure, family)
        failure_events = list(pending.on_failure(code, failure.message))
        held = failure_events.pop() if failure_events else held
        for event in failure_events:
            yield sse_frame(event)
    if held is not None:
        yield sse_frame(held)


class EventStream:
    """One streaming response's frames, pulled one at a time by whoever delivers them.

    Every step runs in the request's context (call record, principal, log keys), whichever thread
    pulls it. The reader must close the stream: after its last frame, or when the client goes
    away; then, on that reader's own path and once, the route's events are closed, the route's
    `on_disconnect` runs and the call is audited as closed by the client (status 499). Nothing is
    written from a finalizer: a stream dropped unclosed writes nothing (the embedded AWS endpoint
    runs finalizers in its own threads, under its journal's lock)."""

    def __init__(self, services: Any, record: CallRecord, pending: PendingStream, family: Family) -> None:
        self._services = services
        self._record = record
        self._pending = pending
        self._frames = _frames(services, record, pending, family)
        self._context = contextvars.copy_context()
        self._lock = threading.Lock()  # one step at a time; close waits for a step in progress
        self._finished = False
        self._closed = False

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> str:
        with self._lock:
            if self._finished or self._closed:
                raise StopIteration
            try:
                return self._context.run(next, self._frames)
            except StopIteration:
                self._finished = True
                raise

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._finished:
                return
            self._context.run(self._hang_up)

    def _hang_up(self) -> None:
        from citegate.governance.calls import end_call

        self._frames.close()
        try:
            close = getattr(self._pending.events, "close", None)
            if close is not None:
                close()
            if self._pending.on_disconnect is not None:
                self._pending.on_disconnect()
        finally:
            with contextlib.suppress(AuditUnavailable):
                end_call(self._services, self._record, CLIENT_CLOSED, "client_closed_request")


def _close_unsent(pending: PendingStream) -> None:
    close = getattr(pending.events, "close", None)
    if close is not None:
        close()


def sse_handler(
    app: LazyResolver, services: ServicesFactory, *, family: Family
) -> Callable[[dict[str, Any], Any], Any]:
    """The Lambda entry point of a streaming route (compare citegate.api.http.http_handler)."""

    @logged
    @traced
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        s = services()
        record, refused = admit_event(s, event, family)
        if refused is not None:
            return finish_call(s, record, refused, family)
        _pending.set(None)
        response = checked(app.resolve(event, context), event, family)
        pending = _pending.get()
        _pending.set(None)
        status = int(response.get("statusCode", 500))
        if pending is None or status != 200:
            if pending is not None:
                _close_unsent(pending)
            return finish_call(s, record, response, family)
        stream = EventStream(s, record, pending, family)
        if s.settings.local_runtime or _delivers_frames.get():
            return stream  # the caller delivers each frame as it is produced, then closes it
        try:
            body = "".join(stream)
        finally:
            stream.close()
        return {"statusCode": 200, "headers": {"Content-Type": SSE, **SSE_HEADERS}, "body": body}

    return lambda_handler


async def deliver(stream: Any, headers: list[tuple[bytes, bytes]], receive: Any, send: Any) -> None:
    """An EventStream sent over ASGI frame by frame, as Lambda response streaming sends it (no
    Content-Length: chunked), by the local gateway and by the AWS streaming entry
    (citegate.api.stream_app). Frames are pulled in worker threads. A client that goes away (an
    ASGI `http.disconnect`) ends the delivery, and in every case the stream is closed here, on the
    request's own path and shielded from cancellation, so the route's cleanup and the call's audit
    record run once and never in a finalizer."""
    import anyio
    import anyio.to_thread

    try:
        async with anyio.create_task_group() as group:

            async def hang_up_watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(hang_up_watch)
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            while True:
                frame = await anyio.to_thread.run_sync(next, stream, None)
                if frame is None:
                    break
                data = frame.encode() if isinstance(frame, str) else bytes(frame)
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_close_quietly, stream)


def _close_quietly(stream: Any) -> None:
    try:
        stream.close()
    except Exception:
        logger.exception("closing a stream failed")
