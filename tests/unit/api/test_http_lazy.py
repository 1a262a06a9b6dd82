"""Cold start (issue 10): the resolver is built on the first event, errors keep their shape, and
importing a route's handler loads none of the heavy libraries (no AWS, no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from citegate.api import routes
from citegate.api.http import json_response, make_resolver, parse_body
from citegate.platform.errors import KbNotFound

FUNCTIONS = Path(__file__).resolve().parents[3] / "functions"
HEAVY = (
    "pydantic",
    "aws_lambda_powertools.event_handler",
    "boto3",
    "numpy",
    "tantivy",
    "citegate.governance.calls",
)
# Handlers that still import their domain modules at module level: remove a name once its handler
# defers them like the others (see citegate.api.http).
NOT_YET_LAZY: set[str] = set()


class Body(BaseModel):
    name: str = Field(min_length=1)


def event(method: str, path: str, body: Any = None) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": "req-1",
            "routeKey": f"{method} {path}",
            "stage": "$default",
        },
        "body": None if body is None else json.dumps(body),
        "isBase64Encoded": False,
    }


def resolve(app: Any, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = app.resolve(event(method, path, body), None)
    return response["statusCode"], json.loads(response["body"])


def test_routes_declared_at_import_are_served_once_the_resolver_is_built() -> None:
    app = make_resolver()

    @app.post("/v1/things")
    def create():  # type: ignore[no-untyped-def]
        return json_response(201, {"name": parse_body(app, Body).name})

    assert app._built is None  # nothing of Powertools' resolver exists before the first event
    assert resolve(app, "POST", "/v1/things", {"name": "a"}) == (201, {"name": "a"})

    @app.get("/v1/late")  # declared after the build: registered directly
    def late():  # type: ignore[no-untyped-def]
        return json_response(200, {"late": True})

    assert resolve(app, "GET", "/v1/late") == (200, {"late": True})


def test_errors_keep_the_family_shape_and_codes() -> None:
    app = make_resolver("answer")

    @app.post("/answer/things/<kb_id>")
    def missing(kb_id: str):  # type: ignore[no-untyped-def]
        raise KbNotFound(f"no {kb_id}")

    status, body = resolve(app, "POST", "/answer/things/kb1")
    assert (status, body["error"], body["requestId"]) == (404, "dataset_not_allowed", "req-1")
    status, body = resolve(app, "GET", "/nowhere")
    assert (status, body["error"]) == (404, "not_found")

    v1 = make_resolver()

    @v1.post("/v1/things")
    def create():  # type: ignore[no-untyped-def]
        return json_response(201, parse_body(v1, Body).model_dump())

    status, body = resolve(v1, "POST", "/v1/things", {"name": ""})
    assert (status, body["error"]) == (400, "invalid_request")
    assert body["details"]["fields"][0]["field"] == "name"


def every_handler() -> list[str]:
    """Routes, the authorizer, the queue consumer and the workflow's steps: every Lambda function."""
    found = {p.name for p in FUNCTIONS.iterdir() if (p / "handler.py").exists()}
    served = {r.function for r in routes.ROUTES} | {
        routes.AUTHORIZER_FUNCTION,
        routes.INGEST_CONSUMER_FUNCTION,
    }
    assert served <= found, f"routes without a handler: {sorted(served - found)}"
    return sorted(found - NOT_YET_LAZY)


@pytest.mark.parametrize("function", every_handler())
def test_importing_a_handler_loads_no_heavy_library(function: str) -> None:
    probe = f"import sys, handler; print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=FUNCTIONS / function, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"{function} imports {done.stdout.strip()} at import time"
