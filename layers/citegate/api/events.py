"""The parts of API Gateway's payload-2.0 event that every entry builds the same way: the local
gateway (citegate.runtime.gateway) and the AWS streaming entry (citegate.api.stream_app) each make
the request context they know, and this the rest, so a handler reads one shape from both. The
same for the Lambda authorizer's event, which both build from a request's event."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl

# Bodies of these types reach the handler as text, when they are UTF-8; anything else base64.
TEXT_TYPES = ("application/json", "text/", "application/x-www-form-urlencoded", "application/xml")


def is_text(content_type: str, body: bytes) -> bool:
    """Whether the body travels as text. A text body that is not UTF-8 reaches the handler
    base64-encoded, as bytes, so the handler can refuse it (400) instead of the entry failing."""
    if not body:
        return True
    if not content_type.startswith(TEXT_TYPES):
        return False
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def query_parameters(query: str) -> dict[str, str]:
    """The query string as API Gateway gives it: a repeated name's values joined by commas."""
    params: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        params[key] = f"{params[key]},{value}" if key in params else value
    return params


def payload_event(
    *,
    route_key: str,
    raw_path: str,
    raw_query: str,
    headers: dict[str, str],
    request_context: dict[str, Any],
    body: bytes,
    cookies: list[str],
    path_params: dict[str, str],
) -> dict[str, Any]:
    """The event itself: optional keys only when they have something, as API Gateway sends it."""
    text = is_text(headers.get("content-type", ""), body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": headers,
        "requestContext": request_context,
        "isBase64Encoded": not text,
    }
    if cookies:
        event["cookies"] = cookies
    params = query_parameters(raw_query)
    if params:
        event["queryStringParameters"] = params
    if path_params:
        event["pathParameters"] = path_params
    if body:
        event["body"] = body.decode() if text else base64.b64encode(body).decode()
    return event


def authorizer_event(event: dict[str, Any], route_arn_prefix: str) -> dict[str, Any]:
    """The HTTP API's Lambda authorizer event (payload 2.0, REQUEST, no identity source but the
    bearer header) for a request's event; the route ARN is `route_arn_prefix` and its route key."""
    return {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": route_arn_prefix + event["routeKey"].replace(" ", ""),
        "identitySource": [event["headers"].get("authorization", "")],
        "routeKey": event["routeKey"],
        "rawPath": event["rawPath"],
        "rawQueryString": event["rawQueryString"],
        "headers": event["headers"],
        "cookies": event.get("cookies", []),
        "queryStringParameters": event.get("queryStringParameters", {}),
        "requestContext": event["requestContext"],
        "pathParameters": event.get("pathParameters", {}),
    }
