"""Clients that hang up mid-stream: the server notices, keeps serving everyone else at once, and
audits each abandoned stream once, as closed by the client, on the request's own path."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from citegate.agents import query_v2
from citegate.agents.chats import service as chats
from tests.integration.conftest import TOKEN, audited

CLIENT_CLOSED = 499


@pytest.fixture
def endless_query(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """/api/v2/query's agent replaced by one that streams a frame every 50 ms for up to 20 s,
    and counts how many of its streams were closed."""
    seen = {"started": 0, "closed": 0}
    lock = threading.Lock()

    def run_query(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        with lock:
            seen["started"] += 1
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                yield {"message_type": query_v2.CONTENT, "content": "."}
                time.sleep(0.05)
        finally:
            with lock:
                seen["closed"] += 1

    monkeypatch.setattr(query_v2, "run_query", run_query)
    return seen


def _hang_up_after_first_frame(live_url: str, path: str, body: dict[str, Any]) -> str:
    """Open a stream, read one frame, drop the connection; the request id of the stream."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        httpx.Client(base_url=live_url, headers=headers, timeout=30) as client,
        client.stream("POST", path, json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        request_id = response.headers["apigw-requestid"]
        frame = next(line for line in response.iter_lines() if line.startswith("data: "))
        assert json.loads(frame.removeprefix("data: "))
    return request_id  # leaving both blocks closed the connection mid-stream


def test_hanging_up_mid_stream_never_stalls_the_server(
    live_url: str, stack: Any, endless_query: dict[str, int]
) -> None:
    request_ids = []
    for _ in range(5):
        request_ids.append(_hang_up_after_first_frame(live_url, "/api/v2/query", {"query": "anything"}))
        started = time.monotonic()
        health = httpx.get(f"{live_url}/healthz", timeout=5)
        assert health.status_code == 200 and time.monotonic() - started < 2
    deadline = time.monotonic() + 10
    while endless_query["closed"] < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert endless_query == {
        "started": 5,
        "closed": 5,
    }  # every abandoned stream was closed, none left running
    for request_id in request_ids:
        records = audited(stack, request_id)
        assert [(r.status, r.reason) for r in records] == [(CLIENT_CLOSED, "client_closed_request")]


def test_many_clients_hanging_up_at_once_while_others_are_served(
    live_url: str, stack: Any, endless_query: dict[str, int]
) -> None:
    results: list[Any] = []

    def hang_up() -> None:
        results.append(_hang_up_after_first_frame(live_url, "/api/v2/query", {"query": "anything"}))

    threads = [threading.Thread(target=hang_up) for _ in range(8)]
    for thread in threads:
        thread.start()
    with httpx.Client(base_url=live_url, timeout=5) as client:
        for _ in range(10):
            assert client.get("/healthz").status_code == 200
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 8
    for request_id in results:
        assert [r.status for r in audited(stack, request_id)] == [CLIENT_CLOSED]


def test_a_chat_reply_abandoned_mid_stream_keeps_what_was_shown(
    live_url: str, stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def slow_deltas() -> Iterator[str]:
        yield "The first part was shown. "
        for _ in range(400):
            time.sleep(0.05)
            yield "."

    def slow_produce(self: Any) -> Iterator[tuple[str, str]]:
        return self._labelled("knowledge_base", slow_deltas())

    monkeypatch.setattr(chats.Turn, "_produce", slow_produce)
    with httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        chat_id = client.post(
            "/api/v1/agent/chats", json={"title": "left early " + uuid.uuid4().hex[:6]}
        ).json()["id"]
    path = f"/api/v1/agent/chats/{chat_id}/messages"
    request_id = _hang_up_after_first_frame(
        live_url, path, {"content": "Tell me everything.", "stream": True}
    )
    assert [r.status for r in audited(stack, request_id)] == [CLIENT_CLOSED]
    with httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        messages = client.get(f"/api/v1/agent/chats/{chat_id}").json()["messages"]
    assert [m["type"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"].startswith("The first part was shown.")
    assert messages[1]["status"] == "interrupted", messages[1]


def test_requests_queued_for_a_busy_function_leave_the_server_free(
    live_url: str, stack: Any, endless_query: dict[str, int]
) -> None:
    """Every environment of /api/v2/query held by an open stream, and 45 more requests queued for
    it (more than the server's worker threads): other routes are still served at once, and the
    queued requests are served as environments come free."""
    from citegate.runtime.functions import max_environments

    headers = {"Authorization": f"Bearer {TOKEN}"}
    holders = []
    for _ in range(max_environments()):
        client = httpx.Client(base_url=live_url, headers=headers, timeout=60)
        stream = client.stream("POST", "/api/v2/query", json={"query": "hold"})
        response = stream.__enter__()
        assert response.status_code == 200
        lines = response.iter_lines()  # kept: dropping it would close the response
        assert next(lines).startswith("data: ")
        holders.append((client, stream, lines))
    queued: list[str] = []
    threads = [
        threading.Thread(
            target=lambda: queued.append(
                _hang_up_after_first_frame(live_url, "/api/v2/query", {"query": "q"})
            )
        )
        for _ in range(45)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert httpx.get(f"{live_url}/healthz", timeout=5).status_code == 200
    assert time.monotonic() - started < 2
    assert queued == []  # still waiting for an environment
    for client, stream, _ in holders:
        stream.__exit__(None, None, None)
        client.close()
    for thread in threads:
        thread.join(timeout=60)
    assert len(queued) == 45
