"""The POST /mcp function's translation: API Gateway event in, one invocation of the tool route's
function per call with the caller's authorizer context unchanged, the MCP answer out (no AWS)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from citegate.api import routes
from citegate.clients.mcp_server import ALL_TOOLS, TOOL_FUNCTIONS, handle_mcp_event, route_event

IAM = {"iam": {"userArn": "arn:aws:iam::123456789012:role/bot", "accessKey": "AKIA0000"}}
TOKEN = {"lambda": {"principal_type": "agent", "principal_id": "reader", "tenant_id": "default"}}


def mcp_event(message: dict[str, Any], authorizer: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": "/mcp",
        "headers": {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "host": "abc123.execute-api.eu-west-1.amazonaws.com",
            "authorization": "AWS4-HMAC-SHA256 Credential=AKIA0000/...",
            "user-agent": "agent/1.0",
            "mcp-protocol-version": "2025-06-18",
        },
        "requestContext": {
            "requestId": "req-1",
            "routeKey": "POST /mcp",
            "domainName": "abc123.execute-api.eu-west-1.amazonaws.com",
            "http": {"method": "POST", "path": "/mcp", "sourceIp": "203.0.113.9"},
            "authorizer": authorizer,
        },
        "body": json.dumps(message),
        "isBase64Encoded": False,
    }


class Recorder:
    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, function: str, event: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((function, event))
        return self.answers[function]


def answer(status: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}


@pytest.mark.parametrize("authorizer", [IAM, TOKEN], ids=["sigv4", "token"])
def test_a_tool_call_invokes_its_route_function_with_the_callers_context(authorizer: dict[str, Any]) -> None:
    invoke = Recorder({"kb_retrieve": answer(200, {"results": [], "kb_id": "docs"})})
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "rag_retrieve", "arguments": {"kb_id": "docs", "query": "volcano", "top_k": 3}},
    }
    reply = handle_mcp_event(mcp_event(call, authorizer), invoke)
    assert reply["statusCode"] == 200, reply
    result = json.loads(reply["body"])["result"]
    assert not result.get("isError") and result["structuredContent"]["kb_id"] == "docs"
    ((function, event),) = invoke.calls
    assert function == "kb_retrieve"
    assert event["routeKey"] == "POST /v1/kb/{kb_id}/retrieve" == event["requestContext"]["routeKey"]
    assert event["rawPath"] == "/v1/kb/docs/retrieve" and event["pathParameters"] == {"kb_id": "docs"}
    assert json.loads(event["body"]) == {"query": "volcano", "top_k": 3}
    context = event["requestContext"]
    assert context["authorizer"] == authorizer  # the front door's verdict, unchanged
    assert context["http"] == {"method": "POST", "path": "/v1/kb/docs/retrieve", "sourceIp": "203.0.113.9"}
    assert context["requestId"].startswith("req-1-")
    # The credentials stay at the front door: the tool's function gets the verdict, not the secret.
    assert "authorization" not in event["headers"] and event["headers"]["user-agent"] == "agent/1.0"


def test_listing_shows_only_the_tools_v1_me_grants() -> None:
    invoke = Recorder({"me": answer(200, {"tools": ["search", "rag_ingest", "web_read"]})})
    reply = handle_mcp_event(mcp_event({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, TOKEN), invoke)
    names = {tool["name"] for tool in json.loads(reply["body"])["result"]["tools"]}
    assert names == {"search", "rag_ingest", "rag_ingest_local_file", "web_read"}
    ((function, event),) = invoke.calls
    assert function == "me" and event["routeKey"] == "GET /v1/me" and "body" not in event


def test_a_caller_v1_me_refuses_sees_no_tools() -> None:
    invoke = Recorder({"me": answer(401, {"error": "unauthorized", "message": "authentication required"})})
    reply = handle_mcp_event(mcp_event({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {}), invoke)
    assert json.loads(reply["body"])["result"]["tools"] == []


def test_refused_credentials_are_refused_before_any_tool() -> None:
    invoke = Recorder({})
    refused = {"lambda": {"auth_error": "the bearer token is not valid"}}
    reply = handle_mcp_event(mcp_event({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, refused), invoke)
    assert reply["statusCode"] == 401 and reply["headers"]["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(reply["body"])["error"] == "unauthorized" and invoke.calls == []


def test_a_function_that_fails_is_a_tool_error_not_a_crash() -> None:
    def invoke(function: str, event: dict[str, Any]) -> Any:
        raise RuntimeError("Task timed out after 29.00 seconds")

    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "rag_list_kb", "arguments": {}},
    }
    reply = handle_mcp_event(mcp_event(call, TOKEN), invoke)
    result = json.loads(reply["body"])["result"]
    assert result["isError"] and result["structuredContent"]["error"] == "server_unavailable"
    assert "timed out" in result["structuredContent"]["message"]


def test_every_tool_is_a_route_and_the_invoked_functions_are_exactly_theirs() -> None:
    for spec in ALL_TOOLS.values():
        assert routes.match(spec.method, spec.path.replace("{", "").replace("}", "")) is not None, spec.name
    expected = {
        route.function
        for route in routes.ROUTES
        if any(route.method == s.method and route.path == s.path for s in ALL_TOOLS.values())
    } | {"me"}
    assert expected == TOOL_FUNCTIONS


def test_route_event_keeps_no_body_for_get() -> None:
    (route,) = [r for r in routes.ROUTES if r.route_key == "GET /v1/tasks/{task_id}"]
    event = route_event(mcp_event({}, TOKEN), route, "/v1/tasks/t-1", {"task_id": "t-1"}, b"")
    assert event["pathParameters"] == {"task_id": "t-1"} and "body" not in event
    assert event["requestContext"]["authorizer"] == TOKEN
