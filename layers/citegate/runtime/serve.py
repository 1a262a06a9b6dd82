"""`make serve` / `citegate serve`: the local stack behind the gateway on 127.0.0.1:${PORT:-8099}."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from citegate.platform.settings import get_settings


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM after its own shutdown, which would kill the process before the
        stack is stopped; this server only asks itself to exit, so the stack always stops cleanly."""

        on_ready: Callable[[], None] = staticmethod(lambda: None)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                self.on_ready()

    return Server


def _listen(host: str, port: int) -> socket.socket:
    """The gateway's socket, bound and listening before the stack starts: a port that is taken
    stops this server before it has touched the data folder. Connections that arrive while the
    stack starts wait in the backlog."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns TCP_NODELAY on only then (else keep-alive requests wait
    # ~40 ms for a delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


def serve(host: str = "127.0.0.1", port: int | None = None) -> int:
    import uvicorn

    from citegate.runtime.gateway import create_app
    from citegate.runtime.stack import DataRootInUse, LocalStack

    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    settings = get_settings()
    if settings.api_token is None:
        print(
            "RAG_API_TOKEN is not set: every /v1 route will answer 401. Export a token first.",
            file=sys.stderr,
        )
    started = time.perf_counter()
    port = settings.port if port is None else port
    # In this order, each before the next: the data folder (a second server on it stops here and
    # changes nothing), the port (taken: stop here), then the stack (journal, provisioning, ...).
    stack = LocalStack(settings)
    try:
        stack.claim()
    except DataRootInUse as error:
        print(f"citegate serve: {error}", file=sys.stderr)
        return 1
    try:
        sock = _listen(host, port)
    except OSError as error:
        stack.release()
        print(f"citegate serve: cannot listen on {host}:{port}: {error.strerror or error}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    try:
        stack.start()
        server = _server_class()(
            uvicorn.Config(create_app(), host=host, port=port, log_level="warning", access_log=False)
        )
        aws_url = stack.aws.endpoint_url if stack.aws else "-"

        def announce() -> None:
            print(
                f"citegate ready on http://{host}:{port} in {time.perf_counter() - started:.1f}s "
                f"(data {settings.data_root.resolve()}, embedded AWS {aws_url}, "
                f"search {settings.search_engine}, embedder {settings.embedder}, "
                f"restored {stack.info.get('restored_writes', 0)} writes, "
                f"resumed {stack.info.get('resumed_tasks', 0)} tasks)",
                flush=True,
            )

        def ready() -> None:
            announce()
            stack.warm_up()

        server.on_ready = ready
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        server.run(sockets=[sock])
    finally:
        sock.close()
        stack.stop()
    return 0
