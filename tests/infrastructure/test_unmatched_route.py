"""Issue 20: a request no route matches answers the same in AWS (the HTTP APIs' `$default` route,
infra/unmatched_route) as locally (the gateway): the project's JSON error shape and codes of the
path's family, 405 where the path is served with other methods, never API Gateway's own body.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from starlette.testclient import TestClient

from citegate.platform.settings import reset_settings
from citegate.runtime.gateway import create_app

HANDLER = Path(__file__).resolve().parents[2] / "infra" / "unmatched_route" / "handler.py"
UNMATCHED = [
    ("GET", "/v1/nothing"),
    ("POST", "/answer/nowhere"),
    ("GET", "/api/v1/agent/nothing"),
    ("DELETE", "/admin/unknown/thing"),
    ("PUT", "/api/v1/web/read"),  # a served path, another method
    ("DELETE", "/healthz"),
    ("GET", "/"),
]


@pytest.fixture(scope="module")
def handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unmatched_route_handler", HANDLER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def local() -> Iterator[TestClient]:
    reset_settings()
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        yield client
    reset_settings()


def aws_event(method: str, path: str) -> dict[str, object]:
    """What API Gateway hands the `$default` route's integration (payload format 2.0)."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"host": "abc123.execute-api.eu-west-1.amazonaws.com"},
        "requestContext": {"http": {"method": method, "path": path}, "requestId": "Ab1Cd2Ef3="},
        "isBase64Encoded": False,
    }


@pytest.mark.parametrize(("method", "path"), UNMATCHED)
def test_aws_answers_an_unmatched_request_as_the_local_gateway_does(
    handler: ModuleType, local: TestClient, method: str, path: str
) -> None:
    expected = local.request(method, path)
    answer = handler.lambda_handler(aws_event(method, path), None)
    assert answer["statusCode"] == expected.status_code
    assert answer["statusCode"] in (404, 405)
    assert answer["headers"]["content-type"] == "application/json"
    body, want = json.loads(answer["body"]), expected.json()
    assert body["requestId"] == "Ab1Cd2Ef3="
    assert {k: v for k, v in body.items() if k != "requestId"} == {
        k: v for k, v in want.items() if k != "requestId"
    }
