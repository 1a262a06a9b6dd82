"""The SSE entry point's frames: the audit record is written before the last frame is released,
a failure midway becomes the route's error frames, and a client that leaves is still audited."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from citegate.api.streaming import CLIENT_CLOSED, EventStream, PendingStream, _frames
from citegate.governance.calls import CallRecord
from citegate.platform.errors import SearchUnavailableError


class Audit:
    def __init__(self, log: list[str], fail: bool = False) -> None:
        self.records: list[Any] = []
        self.log = log
        self.fail = fail

    def write(self, record: Any) -> None:
        if self.fail:
            raise ConnectionError("audit table unreachable")
        self.records.append(record)
        self.log.append(f"audit {record.status}")


def services(log: list[str], fail: bool = False) -> Any:
    return SimpleNamespace(audit=Audit(log, fail), settings=SimpleNamespace(default_tenant="t"))


def on_failure(code: str, message: str) -> list[dict[str, Any]]:
    return [{"type": "error", "error": code, "message": message}, {"type": "end"}]


def consume(frames: Iterator[str], log: list[str]) -> list[dict[str, Any]]:
    events = []
    for frame in frames:
        event = json.loads(frame.removeprefix("data: "))
        log.append(f"frame {event['type']}")
        events.append(event)
    return events


def record() -> CallRecord:
    return CallRecord(request_id="r", route="POST /x", source_ip=None)


def test_the_audit_is_written_before_the_last_frame_is_released() -> None:
    log: list[str] = []
    s = services(log)
    events = iter([{"type": "start"}, {"type": "content"}, {"type": "end"}])
    consume(_frames(s, record(), PendingStream(events, on_failure), "chat"), log)
    assert log == ["frame start", "frame content", "audit 200", "frame end"]


def test_a_failure_midway_becomes_the_routes_error_frames() -> None:
    def events() -> Iterator[dict[str, Any]]:
        yield {"type": "start"}
        raise SearchUnavailableError("the search index is unreachable")

    log: list[str] = []
    s = services(log)
    got = consume(_frames(s, record(), PendingStream(events(), on_failure), "chat"), log)
    assert [e["type"] for e in got] == ["start", "error", "end"]
    assert got[1]["error"] == "SEARCH_UNAVAILABLE" and s.audit.records[0].status == 503


def test_a_stream_that_cannot_be_audited_says_so() -> None:
    log: list[str] = []
    events = iter([{"type": "start"}, {"type": "end"}])
    got = consume(_frames(services(log, fail=True), record(), PendingStream(events, on_failure), "chat"), log)
    assert [e["type"] for e in got] == ["start", "error", "end"]
    assert got[1]["error"] == "AUDIT_UNAVAILABLE"


def test_a_client_that_leaves_closes_the_route_and_is_audited_once_on_the_readers_path() -> None:
    closed: list[bool] = []
    kept: list[str] = []

    def events() -> Iterator[dict[str, Any]]:
        try:
            yield {"type": "start"}
            yield {"type": "content"}
            yield {"type": "content"}
        finally:
            closed.append(True)

    log: list[str] = []
    s = services(log)
    pending = PendingStream(events(), on_failure, on_disconnect=lambda: kept.append("partial reply"))
    stream = EventStream(s, record(), pending, "chat")
    next(stream)
    stream.close()
    stream.close()  # the reader may close twice (end of delivery, then its own cleanup)
    assert closed == [True] and kept == ["partial reply"]
    assert [r.status for r in s.audit.records] == [CLIENT_CLOSED]
    assert list(stream) == []


def test_a_stream_read_to_its_end_is_audited_once_and_its_close_adds_nothing() -> None:
    kept: list[str] = []
    log: list[str] = []
    s = services(log)
    events = iter([{"type": "start"}, {"type": "end"}])
    stream = EventStream(s, record(), PendingStream(events, on_failure, lambda: kept.append("x")), "chat")
    assert [e["type"] for e in consume(stream, log)] == ["start", "end"]
    stream.close()
    assert [r.status for r in s.audit.records] == [200] and kept == []


def test_a_stream_dropped_unclosed_writes_nothing_from_the_garbage_collector() -> None:
    """The embedded AWS endpoint's threads hold its journal lock while Python may run finalizers:
    a write from one would wait for that lock forever (the stall an acceptance test saw)."""
    log: list[str] = []
    s = services(log)

    def events() -> Iterator[dict[str, Any]]:
        yield {"type": "start"}
        yield {"type": "content"}

    stream = EventStream(s, record(), PendingStream(events(), on_failure, lambda: log.append("kept")), "chat")
    next(stream)
    del stream
    gc.collect()
    assert s.audit.records == [] and "kept" not in log
