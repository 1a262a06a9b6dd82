"""The concurrency tier: the in-process local stack behind the real gateway on a loopback port,
reached by many HTTP clients at once (real sockets, so clients can also hang up mid-stream)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from citegate.runtime.aws_endpoint import free_port
from citegate.runtime.gateway import create_app


@pytest.fixture(scope="session")
def live_url(stack: Any) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, name="concurrency-gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the gateway did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
