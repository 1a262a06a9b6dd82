"""The local gateway streams a handler's iterator as server-sent events, chunk by chunk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.api import routes
from citegate.runtime import gateway


def test_an_iterator_from_a_handler_is_streamed_as_sse(monkeypatch: pytest.MonkeyPatch) -> None:
    streaming = routes.Route("POST", "/stream-test", "stream_test", auth="none", streaming=True)
    monkeypatch.setattr(routes, "ROUTES", (*routes.ROUTES, streaming))

    def handler(function: str, event: dict[str, Any]) -> Iterator[bytes]:
        assert function == "stream_test" and event["routeKey"] == "POST /stream-test"
        for n in range(3):
            yield f'data: {{"n": {n}}}\n\n'.encode()

    monkeypatch.setattr(gateway, "invoke", handler)
    with TestClient(gateway.create_app()) as client, client.stream("POST", "/stream-test") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert events == ['data: {"n": 0}', 'data: {"n": 1}', 'data: {"n": 2}']
