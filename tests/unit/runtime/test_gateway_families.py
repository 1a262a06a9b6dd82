"""Issue 19: the route table names each route's error family once; the handlers use it and the local
gateway answers its own refusals (no route, method not allowed, payload too large, the router's) in
it, so spec 001's paths answer upper-case codes there too. And the gateway answers CORS preflights as
the deployed public API does (citegate.platform.resources.CORS; the synthesized template is compared in
tests/infrastructure/test_cors.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from citegate.api import routes
from citegate.platform import resources
from citegate.platform.settings import reset_settings
from citegate.runtime.functions import functions_dir
from citegate.runtime.gateway import MAX_PAYLOAD_BYTES, create_app

PAGE = "https://docs.example.com"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("CITEGATE_ALLOWED_ORIGINS", f"{PAGE}, https://console.example.com")
    reset_settings()
    with TestClient(create_app(), raise_server_exceptions=False) as test_client:
        yield test_client
    reset_settings()


def _declared_family(function: str) -> str:
    """The family a handler passes to make_resolver / http_handler / sse_handler ("v1" by default)."""
    source = (functions_dir() / function / "handler.py").read_text()
    declared = set(re.findall(r'make_resolver\("(\w+)"\)', source))
    declared |= set(re.findall(r'family="(\w+)"', source))
    if "make_resolver()" in source:
        declared.add("v1")
    assert len(declared) <= 1, (function, declared)
    return declared.pop() if declared else "v1"


@pytest.mark.parametrize("function", sorted({r.function for r in routes.ROUTES}))
def test_every_handler_uses_its_routes_family(function: str) -> None:
    assert _declared_family(function) == routes.family_of_function(function)


def test_spec_001_and_000_routes_are_in_their_families() -> None:
    for route in routes.ROUTES:
        if route.path.startswith(("/api/v1/agent/", "/api/v1/web/", "/api/v2/")):
            assert route.family == "chat", route.route_key
        elif route.path.startswith(("/answer/", "/agent/tools/")):
            assert route.family == "answer", route.route_key
        elif route.path in ("/v1/models", "/v1/chat/completions"):  # OpenAI's protocol
            assert route.family == "openai", route.route_key
        else:
            assert route.family == "v1", route.route_key


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/api/v1/agent/nothing", 404, "NOT_FOUND"),
        ("GET", "/api/v1/agent/chats/c1/nothing", 404, "NOT_FOUND"),
        ("POST", "/api/v1/web/fetch", 404, "NOT_FOUND"),
        ("PUT", "/api/v1/web/read", 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/api/v2/query", 405, "METHOD_NOT_ALLOWED"),
        ("PUT", "/api/v1/agent/chats/c1", 405, "METHOD_NOT_ALLOWED"),
        ("TRACE", "/api/v1/agent/chats", 405, "METHOD_NOT_ALLOWED"),  # refused by the router itself
        ("GET", "/answer/ask", 405, "method_not_allowed"),
        ("GET", "/agent/tools/nothing", 404, "not_found"),
        ("DELETE", "/v1/kb", 405, "method_not_allowed"),
        ("GET", "/nothing", 404, "not_found"),
        ("GET", "/api/v1/nothing", 404, "not_found"),  # /api/v1/knowledge (v1) and /api/v1/agent (chat)
    ],
)
def test_gateway_refusals_use_the_family_codes(
    client: TestClient, method: str, path: str, status: int, code: str
) -> None:
    response = client.request(method, path, content=b"{}")
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code, body
    assert body["requestId"] == response.headers["apigw-requestid"] or method == "TRACE"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/v1/agent/chats", "PAYLOAD_TOO_LARGE"),
        ("/api/v1/web/read", "PAYLOAD_TOO_LARGE"),
        ("/answer/ask", "payload_too_large"),
        ("/v1/kb", "payload_too_large"),
    ],
)
def test_payload_too_large_in_the_family_codes(client: TestClient, path: str, code: str) -> None:
    response = client.post(path, content=b"x" * (MAX_PAYLOAD_BYTES + 1))
    assert response.status_code == 413
    assert response.json()["error"] == code


def test_family_of_a_path_that_matches_no_route() -> None:
    assert routes.family_of_path("/api/v1/agent/anything/else") == "chat"
    assert routes.family_of_path("/api/v2/other") == "chat"
    assert routes.family_of_path("/answer/other") == "answer"
    assert routes.family_of_path("/api/v1/knowledge/other") == "v1"
    assert routes.family_of_path("/") == "v1"


# -- CORS ------------------------------------------------------------------------------------------


def _preflight(client: TestClient, path: str, origin: str) -> dict[str, str]:
    response = client.options(
        path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-session-token",
        },
    )
    assert response.status_code == 204, response.text
    assert response.content == b""
    return {k.lower(): v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


@pytest.mark.parametrize(
    "path", ["/answer/ask", "/answer/sessions/s1/turns", "/api/v1/agent/chats", "/v1/kb", "/no/route"]
)
def test_preflight_is_answered_as_the_deployed_api_answers_it(client: TestClient, path: str) -> None:
    headers = _preflight(client, path, PAGE)
    assert headers == {
        "access-control-allow-origin": PAGE,
        "access-control-allow-methods": ",".join(resources.CORS.allow_methods),
        "access-control-allow-headers": ",".join(resources.CORS.allow_headers),
        "access-control-max-age": str(resources.CORS.max_age_seconds),
    }
    # What a docs-site widget sends: the session token, JSON, a bearer token.
    assert {"authorization", "content-type", "x-session-token"} <= set(resources.CORS.allow_headers)


def test_preflight_from_another_origin_gets_no_cors_headers(client: TestClient) -> None:
    assert _preflight(client, "/answer/ask", "https://evil.example.net") == {}


def test_an_options_request_that_is_not_a_preflight_is_routed(client: TestClient) -> None:
    response = client.options("/answer/ask")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_responses_to_a_page_origin_carry_the_cors_headers(client: TestClient) -> None:
    response = client.get("/api/v1/agent/nothing", headers={"Origin": PAGE})
    assert response.status_code == 404
    assert response.headers["access-control-allow-origin"] == PAGE
    assert response.headers["access-control-expose-headers"] == ",".join(resources.CORS.expose_headers)
    other = client.get("/api/v1/agent/nothing", headers={"Origin": "https://evil.example.net"})
    assert "access-control-allow-origin" not in other.headers
