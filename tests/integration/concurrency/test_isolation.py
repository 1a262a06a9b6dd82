"""Requests served at the same time never see each other's event, body or request id.

Every resolver route is called by several clients at once with distinct requests, and the
requests are made to overlap on purpose: each one waits, inside the function, right after its
event has been taken in, until all of them have arrived. Any state shared between the requests
being served (a module or class attribute, a resolver used by two events) then shows up in every
round, not by luck. The last test proves the check bites: with Powertools' stock resolver, whose
current event lives on its class, the same round finds answers carrying another request's id.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from citegate.api import http as api
from citegate.api import routes
from citegate.runtime import functions
from tests.integration.conftest import TOKEN

CLIENTS = 4
RESOLVER_ROUTES = [r for r in routes.ROUTES if r.function != "mcp"]  # MCP has its own tests


@contextmanager
def overlapping(parties: int) -> Iterator[threading.Barrier]:
    """Hold every request at the start of its route until `parties` requests have arrived."""
    barrier = threading.Barrier(parties, timeout=15)
    original = APIGatewayHttpResolver._resolve

    def resolve_when_all_arrived(self: Any) -> Any:
        barrier.wait()
        return original(self)

    APIGatewayHttpResolver._resolve = resolve_when_all_arrived  # type: ignore[method-assign]
    try:
        yield barrier
    finally:
        APIGatewayHttpResolver._resolve = original  # type: ignore[method-assign]


def _request(route: routes.Route, n: int, kb_id: str) -> tuple[str, str, Any]:
    """A distinct request for `route`: its own path ids (but a knowledge base that exists, so the
    request gets past admission into the handler) and, where there is a body, its own body (a
    JSON array, which every route refuses with a 4xx naming nothing but this request)."""
    tag = f"n{n}x{uuid.uuid4().hex[:6]}"
    path = route.path.replace("{kb_id}", kb_id)
    for name in routes.Route.pattern(route).groupindex:
        path = path.replace("{" + name + "}", f"{name.replace('_', '')}-{tag}")
    body = None if route.method in ("GET", "DELETE") else [tag]
    return tag, path, body


def _serve_round(live_url: str, route: routes.Route, kb_id: str) -> list[str]:
    """One round of CLIENTS overlapping requests; what went wrong, if anything."""
    requests = [_request(route, n, kb_id) for n in range(CLIENTS)]

    def call(request: tuple[str, str, Any]) -> tuple[str, httpx.Response]:
        tag, path, body = request
        with httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
            return tag, c.request(route.method, path, json=body)

    problems = []
    with overlapping(CLIENTS), ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(call, requests))
    for tag, response in answers:
        where = f"{route.route_key} [{tag}] {response.status_code}"
        if response.status_code >= 500:
            problems.append(f"{where}: server error {response.text[:200]}")
            continue
        try:
            body = response.json()
        except ValueError:
            continue
        if isinstance(body, dict) and "requestId" in body:
            if body["requestId"] != response.headers.get("apigw-requestid"):
                problems.append(f"{where}: answered with another request's id")
            if response.status_code == 404 and "{" in route.path and tag not in body.get("message", ""):
                problems.append(f"{where}: the 404 names another request's id: {body.get('message')}")
    return problems


@pytest.fixture(scope="module")
def kb_id(live_url: str) -> str:
    kb = "iso-" + uuid.uuid4().hex[:6]
    with httpx.Client(base_url=live_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
        assert client.post("/v1/kb", json={"kb_id": kb, "name": "isolation"}).status_code == 201
    return kb


@pytest.mark.parametrize("route", RESOLVER_ROUTES, ids=lambda r: r.route_key)
def test_every_route_serves_overlapping_requests_each_as_its_own(
    live_url: str, kb_id: str, route: routes.Route
) -> None:
    assert _serve_round(live_url, route, kb_id) == []


def test_the_check_finds_shared_state_when_there_is_some(
    live_url: str, kb_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serve with Powertools' own resolver (its current event is a class attribute): overlapping
    requests then read each other's events, and the round above reports it."""
    monkeypatch.setattr(api, "request_local_resolver_class", lambda: APIGatewayHttpResolver)
    functions.reset_pools()  # fresh environments, built with the stock resolver
    try:
        route = next(r for r in RESOLVER_ROUTES if r.route_key == "POST /v1/kb/{kb_id}/retrieve")
        problems = _serve_round(live_url, route, kb_id)
    finally:
        functions.reset_pools()
    assert len(problems) >= CLIENTS - 1, problems
