"""POST /mcp: the MCP server over streamable HTTP (stateless, JSON responses) behind both front doors.

Each tool call invokes the tool route's own function with this request's authorizer context, so the
principal, its policy and the audit record are those of the HTTP route (citegate.clients.mcp_server).
"""

from typing import Any

from citegate.platform.observability import logged, traced

_invoke: Any = None  # built on the first request (its Lambda client is reused after)


@logged
@traced
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The MCP SDK, its ASGI stack and the tools' models load on the first request, not at import.
    from citegate.clients.mcp_server import default_invoker, handle_mcp_event

    global _invoke
    if _invoke is None:
        _invoke = default_invoker()
    return handle_mcp_event(event, _invoke)
