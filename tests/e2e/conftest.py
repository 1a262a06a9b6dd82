"""The real server (`citegate serve`) as a subprocess, reached over loopback HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "e2e-token"
# Where the browser tests save their screenshots: outside the tree unless asked
# (`make screenshots` refreshes docs/screenshots with CITEGATE_SCREENSHOTS_DIR).
SCREENSHOTS = Path(os.environ.get("CITEGATE_SCREENSHOTS_DIR") or ROOT / "bench-results" / "screenshots")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, data_root: Path, env: dict[str, str] | None = None) -> None:
        self.data_root = data_root
        self.port = _free_port()
        self.env = {
            **os.environ,
            "RAG_DATA_ROOT": str(data_root),
            "RAG_API_TOKEN": TOKEN,
            "PORT": str(self.port),
            **(env or {}),
        }
        self.process: subprocess.Popen[str] | None = None
        self.ready_line = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)

    def start(self, timeout: float = 90) -> Server:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "citegate.clients.cli", "serve"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        output: list[str] = []
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            output.append(line)
            if not line and self.process.poll() is not None:
                tail = "".join(output[-30:])
                raise AssertionError(f"server exited with {self.process.returncode}:\n{tail}")
            if line.startswith("citegate ready on"):
                self.ready_line = line.strip()
                return self
        raise AssertionError("server did not become ready in time")

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Server] = []

    def make(env: dict[str, str] | None = None, data_root: Path | None = None) -> Server:
        server = Server(data_root or tmp_path / "data", env)
        started.append(server)
        return server

    yield make
    for server in started:
        if server.process and server.process.poll() is None:
            server.stop()
