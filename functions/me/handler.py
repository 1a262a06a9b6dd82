"""GET /v1/me: the caller's principal and what its policy grants (tools, knowledge bases, writes)."""

from citegate.container import services
from citegate.errors import Unauthorized
from citegate.http.api import http_handler, json_response, make_resolver, principal

app = make_resolver()


@app.get("/v1/me")
def me():  # type: ignore[no-untyped-def]
    caller = principal(app)
    if not caller.authenticated:
        raise Unauthorized(
            "authentication required: send 'Authorization: Bearer <token>' or sign the request"
        )
    policy = services().policies.for_principal(caller)
    return json_response(
        200,
        {
            "principal": {"type": caller.type, "id": caller.id, "tenant_id": caller.tenant_id},
            "tools": policy.tools if policy else [],
            "knowledge_bases": policy.knowledge_bases if policy else [],
            "write_actions": policy.write_actions if policy else [],
        },
    )


lambda_handler = http_handler(app)
