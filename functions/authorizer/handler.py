"""The Lambda authorizer (HTTP API, simple responses): turns credentials into a principal.

It always lets the request through with either a principal or the reason credentials were
refused, so that the handler answers 401 in the decided JSON error shape (API Gateway's own
authorizer denial has a fixed body) and the refusal is audited like every other call.

Accepted agent credentials and JWTs are remembered for at most 60 s in this environment
(citegate.governance.identity.credential_cache): API Gateway's authorizer cache cannot key anonymous requests.
"""

from typing import Any

from citegate.container import services
from citegate.platform.observability import logged


@logged
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from citegate.governance.identity.authenticate import (
        authenticate,  # with settings and pydantic: not at import
    )
    from citegate.governance.identity.credential_cache import CREDENTIALS

    s = services()
    method = ((event.get("requestContext") or {}).get("http") or {}).get("method")
    result = authenticate(
        event.get("headers") or {},
        s.settings,
        s.policies,
        cookies=event.get("cookies"),
        method=method,
        cache=CREDENTIALS,
    )
    if result.principal is None:
        context = {"auth_error": result.error or "unauthorized", "auth_status": result.status}
        return {"isAuthorized": True, "context": context}
    return {"isAuthorized": True, "context": result.principal.to_authorizer_context()}
