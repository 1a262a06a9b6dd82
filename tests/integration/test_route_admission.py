"""Who may call is decided before what they sent is read, for every route in the table.

Each governed route is called three ways with a junk body (not JSON at all): with a forged token,
with no credentials, and as an agent whose policy grants some other tool. A stranger learns
nothing about a route's schema: never a 400 before the caller is known and allowed. The codes are
the route family's own (spec 004's lower-case, spec 001's upper-case, spec 000's, OpenAI's).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from citegate.api import routes
from citegate.platform.errors import ForbiddenTool, Unauthorized, error_code
from citegate.platform.principal import anonymous
from citegate.runtime.functions import functions_dir
from citegate.runtime.gateway import create_app
from tests.integration.test_governance import _agent

GOVERNED = [r for r in routes.ROUTES if r.tool is not None]
JUNK = b"\x00{not json"


def _family(route: routes.Route) -> Any:
    source = (functions_dir() / route.function / "handler.py").read_text()
    found = re.search(r'family="(\w+)"', source) or re.search(r'make_resolver\("(\w+)"\)', source)
    return found.group(1) if found else "v1"


def _code(response: Any) -> Any:
    """The error code: `error`, or in OpenAI's shape (the OpenAI-compatible routes) `error.code`."""
    error = response.json()["error"]
    return error["code"] if isinstance(error, dict) else error


def _path(route: routes.Route) -> str:
    path = route.path
    for name in route.pattern().groupindex:
        path = path.replace("{" + name + "}", f"{name.replace('_', '')}-{uuid.uuid4().hex[:6]}")
    return path


def _send(client: TestClient, route: routes.Route, headers: dict[str, str]) -> Any:
    body = None if route.method in ("GET", "DELETE") else JUNK
    return client.request(
        route.method, _path(route), content=body, headers={"content-type": "application/json", **headers}
    )


@pytest.fixture(scope="module")
def stranger(stack: Any) -> TestClient:
    with TestClient(create_app()) as client:
        yield client


@pytest.fixture(scope="module")
def other_tool_token(client: TestClient) -> str:
    _, token = _agent(client, {"tools": ["rag_task_status"], "knowledge_bases": ["*"]})
    return token


@pytest.mark.parametrize("route", GOVERNED, ids=lambda r: r.route_key)
def test_a_forged_token_is_refused_before_the_body_is_read(stranger: TestClient, route: routes.Route) -> None:
    response = _send(stranger, route, {"Authorization": "Bearer forged-" + uuid.uuid4().hex})
    assert response.status_code == 401, response.text
    assert _code(response) == error_code(Unauthorized(""), _family(route))


@pytest.mark.parametrize("route", GOVERNED, ids=lambda r: r.route_key)
def test_no_credentials_is_refused_unless_the_route_is_open_to_public_readers(
    stranger: TestClient, route: routes.Route, stack: Any
) -> None:
    response = _send(stranger, route, {})
    if not route.anonymous:
        assert response.status_code == 401, response.text
        assert _code(response) == error_code(Unauthorized(""), _family(route))
        return
    # Open to public-read: the anonymous policy decides; only a caller it admits is told about the body.
    # A tool it does not grant is authenticated-read there: sign in first (401, spec 000 6.1).
    public = stack.services.policies.for_principal(anonymous(stack.settings.default_tenant))
    if public is not None and public.allows_tool(route.tool or ""):
        assert response.status_code in (400, 404), response.text
    else:
        assert response.status_code == 401, response.text
        assert _code(response) == error_code(Unauthorized(""), _family(route))


@pytest.mark.parametrize("route", GOVERNED, ids=lambda r: r.route_key)
def test_a_caller_without_the_tool_is_refused_before_the_body_is_read(
    client: TestClient, other_tool_token: str, route: routes.Route
) -> None:
    response = _send(client, route, {"Authorization": f"Bearer {other_tool_token}"})
    if route.every_caller or route.tool == "rag_task_status":
        assert response.status_code != 403, response.text
        return
    assert response.status_code == 403, response.text
    body = response.json()
    code = error_code(ForbiddenTool(""), _family(route))
    assert _code(response) == code
    assert code == "forbidden_tool" or body["details"]["reason"] == "forbidden_tool"
