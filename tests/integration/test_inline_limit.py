"""Inline documents fit Lambda's 6 MB event (issue 20): the largest one the service takes, base64
and all, makes an event Lambda accepts; anything larger is 413 `payload_too_large` naming the
upload route; and the local gateway refuses an event Lambda would refuse, in the route's codes."""

from __future__ import annotations

import base64
import json

from starlette.testclient import TestClient

from citegate.platform.settings import get_settings
from citegate.runtime.gateway import MAX_EVENT_BYTES, MAX_PAYLOAD_BYTES

LAMBDA_EVENT_LIMIT = 6_291_456  # Lambda's synchronous invocation payload


def test_the_largest_inline_document_fits_a_lambda_event(client: TestClient, kb: str) -> None:
    limit = get_settings().max_inline_document_bytes
    assert MAX_EVENT_BYTES == LAMBDA_EVENT_LIMIT
    # Base64 and the JSON around it, with room for headers and the request context.
    body = json.dumps({"base64_file": base64.b64encode(bytes(limit)).decode(), "source_name": "a.png"})
    assert len(body) + 64 * 1024 < LAMBDA_EVENT_LIMIT
    png = b"\x89PNG\r\n\x1a\n" + bytes(limit - 8)
    at_limit = client.post(
        f"/v1/kb/{kb}/documents",
        json={"base64_file": base64.b64encode(png).decode(), "source_name": "logo.png"},
    )
    # Past the size check and the event check: refused for what it is, not for its size.
    assert at_limit.status_code == 415, at_limit.text


def test_one_byte_more_is_413_pointing_at_the_upload_route(client: TestClient, kb: str) -> None:
    limit = get_settings().max_inline_document_bytes
    for body in (
        {"base64_file": base64.b64encode(bytes(limit + 3)).decode(), "source_name": "a.pdf"},
        {"text": "a" * (limit + 1), "source_name": "a.txt"},
    ):
        response = client.post(f"/v1/kb/{kb}/documents", json=body)
        assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
        details = response.json()["details"]
        assert details["limit"] == limit and details["upload_route"] == "POST /v1/kb/{kb_id}/uploads"
        assert "uploads" in response.json()["message"]


def test_the_local_gateway_refuses_an_event_lambda_would_refuse(client: TestClient, kb: str) -> None:
    # Under the inline limit, but every quote is escaped twice on its way into the event.
    text = '"' * (3 * 1024 * 1024)
    response = client.post(f"/v1/kb/{kb}/documents", json={"text": text, "source_name": "q.txt"})
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    assert response.json()["details"]["limit"] == LAMBDA_EVENT_LIMIT
    # In the route's own family: spec 001's upper-case codes.
    chat = client.post("/api/v1/agent/chats/c1/messages", json={"content": '"' * (3 * 1024 * 1024)})
    assert chat.status_code == 413 and chat.json()["error"] == "PAYLOAD_TOO_LARGE"


def test_a_body_over_the_gateways_limit_is_413_with_its_size_and_the_limit(
    client: TestClient, kb: str
) -> None:
    """docs/api.md: 413 carries `details.size` and `details.limit`, also when the gateway's own
    10 MB body limit answers (before the route, the token or the body's JSON is looked at)."""
    body = b"x" * (MAX_PAYLOAD_BYTES + 1)
    for path, code in (
        (f"/v1/kb/{kb}/documents", "payload_too_large"),
        ("/answer/ask", "payload_too_large"),
        ("/api/v1/agent/chats/c1/messages", "PAYLOAD_TOO_LARGE"),
    ):
        response = client.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 413, response.text
        error = response.json()
        assert error["error"] == code
        assert error["details"]["size"] == len(body) and error["details"]["limit"] == MAX_PAYLOAD_BYTES
    documents = client.post(
        f"/v1/kb/{kb}/documents", content=body, headers={"content-type": "application/json"}
    )
    assert documents.json()["details"]["upload_route"] == "POST /v1/kb/{kb_id}/uploads"
