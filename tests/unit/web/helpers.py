"""Test doubles for the web tests: a pretend-public address routed to the loopback site."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from citegate.platform.errors import RateLimited

PUBLIC_IP = "93.184.216.34"  # what "public.test" resolves to; never actually contacted


class LoopbackTransport(httpx.BaseTransport):
    """Delivers connections for PUBLIC_IP to the loopback site, so the reader can be tested with
    loopback refused (allow_loopback off): no packet leaves 127.0.0.1."""

    def __init__(self, site: str) -> None:
        self.port = httpx.URL(site).port
        self.inner = httpx.HTTPTransport()
        self.connected: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.connected.append(str(request.url.host))
        if request.url.host != PUBLIC_IP:
            raise AssertionError(f"the test tried to connect to {request.url.host}")
        request.url = request.url.copy_with(host="127.0.0.1", port=self.port)
        return self.inner.handle_request(request)

    def close(self) -> None:
        # Every httpx.Client closes its transport on exit, and the browser's fetches share this
        # one concurrently: the connection pool lives as long as the test instead.
        pass


def public_resolver(host: str, port: int) -> list[str]:
    if host == "public.test":
        return [PUBLIC_IP]
    if host == "internal.test":
        return ["10.0.0.8"]
    raise OSError(f"unknown host {host}")


class MemoryTable:
    """get_item/put_item of a DynamoDB table, in memory."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def get_item(self, Key: dict[str, str]) -> dict[str, Any]:
        item = self.items.get(Key["cache_key"])
        return {"Item": dict(item)} if item else {}

    def put_item(self, Item: dict[str, Any]) -> None:
        self.items[Item["cache_key"]] = dict(Item)


class MemoryCounters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def hit(self, key: str, limit: int, window_seconds: int = 60, amount: int = 1) -> int:
        with self.lock:
            if self.counts.get(key, 0) + amount > limit:
                raise RateLimited("rate limit", details={"limit": limit, "retry_after": 30})
            self.counts[key] = self.counts.get(key, 0) + amount
            return self.counts[key]

    def hit_all(self, limits: list[tuple[str, int]], window_seconds: int = 60) -> None:
        with self.lock:  # all or nothing, like the DynamoDB transaction
            for key, limit in limits:
                if self.counts.get(key, 0) + 1 > limit:
                    raise RateLimited("rate limit", details={"limit": limit, "retry_after": 30})
            for key, _ in limits:
                self.counts[key] = self.counts.get(key, 0) + 1


class Clock:
    def __init__(self, now: float = 1_750_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
