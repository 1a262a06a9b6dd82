"""The `$default` route of both HTTP APIs: a request that no route matches gets the project's JSON
error shape, as from the local gateway (citegate.runtime.gateway), not API Gateway's own
`{"message":"Not Found"}`: 405 `method_not_allowed` when the path is served with other methods,
404 `route_not_found` otherwise, in the codes of the path's family (routes.family_of_path).

No authorizer runs first (the local gateway, too, refuses an unknown route before it looks at
credentials), and the function reads nothing: the shared layer only, no grants.
"""

from __future__ import annotations

import json
from typing import Any

from citegate.api import routes
from citegate.platform.errors import (
    CitegateError,
    RouteNotFound,
    error_body,
    error_code,
    error_details,
    error_status,
)


def refusal(method: str, path: str) -> CitegateError:
    """What the local gateway answers for an unmatched request (citegate.runtime.gateway._dispatch)."""
    if routes.path_exists(path):
        # The gateway's MethodNotAllowed lives with Starlette, which Lambda does not have: the same
        # kind and status on a plain CitegateError give the same code and body.
        refused = CitegateError(f"{method} is not allowed on {path}")
        refused.kind, refused.status = "method_not_allowed", 405  # type: ignore[misc]
        return refused
    return RouteNotFound(f"no route for {method} {path}")


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    context_ = event.get("requestContext") or {}
    method = str((context_.get("http") or {}).get("method") or "GET")
    path = str(event.get("rawPath") or "/")
    request_id = str(context_.get("requestId") or "")
    error = refusal(method, path)
    family = routes.family_of_path(path)
    body = error_body(
        error_code(error, family), error.message, request_id, error_details(error, family), family=family
    )
    return {
        "statusCode": error_status(error, family),
        "headers": {"content-type": "application/json"},
        "body": json.dumps(body),
    }
