"""Who may call a route is settled before the route reads its body, in one place, from the route
table (citegate.api.routes): spec 000 section 6.2's order, token first.

The entry points (`citegate.api.http.http_handler`, `citegate.api.streaming.sse_handler`) admit
every event before the handler runs: the caller is identified, the policy loaded, rate limits and
the tool checked, then the knowledge base named in the path and the route's write action. A
refusal is answered there, in the route family's JSON shape, and audited; the handler never runs,
so no caller learns a schema it may not use. A handler gets the admitted call from `admitted()`;
a `scoped` route hands the scope its body asks for to `govern`, which checks it (then the write
action), and the entry point refuses to answer a scoped route that skipped it.
"""

from __future__ import annotations

import base64
import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from citegate.api import routes
from citegate.platform.errors import (
    CitegateError,
    Family,
    Unauthorized,
    error_body,
    error_code,
    error_details,
    error_status,
)

if TYPE_CHECKING:
    from citegate.governance.calls import Authorized
    from citegate.governance.policy.model import RequestedScope
    from citegate.governance.ports import Governing


@dataclass
class Admission:
    route: routes.Route
    call: Authorized
    services: Governing  # what the call was admitted with; `govern` checks its scope on the same
    governed: bool = False  # a scoped route's requested scope has been checked


_admission: ContextVar[Admission | None] = ContextVar("citegate_admission", default=None)


def admit(s: Governing, event: dict[str, Any], family: Family) -> dict[str, Any] | None:
    """Admit the event to its route; None when admitted, else the refusal to answer with."""
    _admission.set(None)
    route = routes.by_key(str(event.get("routeKey") or ""))
    if route is None or route.tool is None:
        return None  # not a governed route (/healthz; /mcp governs each tool call it makes)
    from citegate.governance.calls import admit as admit_caller
    from citegate.governance.calls import current_call
    from citegate.governance.identity.resolve import resolve_principal

    try:
        principal = resolve_principal(event, s)
        if not principal.authenticated and route.body_credential == "caller_agent_key":
            principal = _caller_agent(s, event) or principal
        current_call().principal = principal
        kb_id = (event.get("pathParameters") or {}).get("kb_id")
        call = admit_caller(
            s,
            principal,
            route.tool,
            kb_id=kb_id,
            write=None if route.scoped else route.write,
            allow_anonymous=route.anonymous,
            tool_granted=route.every_caller,
        )
    except CitegateError as refused:
        return refusal(event, family, refused)
    _admission.set(Admission(route, call, s))
    return None


def refusal(event: dict[str, Any], family: Family, error: CitegateError) -> dict[str, Any]:
    request_id = str((event.get("requestContext") or {}).get("requestId") or "")
    body = error_body(
        error_code(error, family), error.message, request_id, error_details(error, family), family=family
    )
    headers = {"Content-Type": "application/json"}
    if "retry_after" in error.details:
        headers["Retry-After"] = str(error.details["retry_after"])
    return {
        "statusCode": error_status(error, family),
        "headers": headers,
        "body": json.dumps(body, ensure_ascii=False),
    }


def _caller_agent(s: Governing, event: dict[str, Any]) -> Any:
    """Spec 002's caller agent key from the body (`metadata.caller_agent_key`), read leniently: a
    body that is not JSON, or has no key, leaves the caller anonymous (and so refused)."""
    from citegate.governance.identity.authenticate import agent_from_secret

    raw = event.get("body") or ""
    try:
        text = base64.b64decode(raw).decode() if event.get("isBase64Encoded") else raw
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    metadata = data.get("metadata") if isinstance(data, dict) else None
    key = metadata.get("caller_agent_key") if isinstance(metadata, dict) else None
    if not isinstance(key, str) or not key:
        return None
    result = agent_from_secret(key, "caller_key", s.policies)
    if result.principal is None:
        raise Unauthorized(result.error or "the caller agent key is not valid")
    return result.principal


def current() -> Admission:
    found = _admission.get()
    if found is None:
        raise RuntimeError(
            "no admitted call: the route is not in citegate.api.routes, or was invoked around its entry"
        )
    return found


def admitted() -> Authorized:
    """The call as admitted by the route's declaration (for routes whose body carries no scope)."""
    admission = current()
    if admission.route.scoped:
        raise RuntimeError(f"{admission.route.route_key} is scoped: call govern(app, requested=...)")
    return admission.call


def govern_scope(s: Governing, requested: RequestedScope | None) -> Authorized:
    """A scoped route's requested scope, checked against the admitted call; then its write action."""
    from citegate.governance.calls import narrow

    admission = current()
    call = narrow(s, admission.call, requested, write=admission.route.write)
    admission.governed = True
    return call


def unfinished(response: dict[str, Any]) -> bool:
    """A scoped route that answered without checking its requested scope (fail closed)."""
    admission = _admission.get()
    return (
        admission is not None
        and admission.route.scoped
        and not admission.governed
        and int(response.get("statusCode", 500)) < 400
    )
