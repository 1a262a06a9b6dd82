"""GET /v1/me: the caller's principal and what its policy grants (tools, knowledge bases, writes)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/me")
def me():  # type: ignore[no-untyped-def]
    call = authorized(app)
    caller, policy = call.principal, call.policy
    return json_response(
        200,
        {
            "principal": {"type": caller.type, "id": caller.id, "tenant_id": caller.tenant_id},
            "tools": policy.tools,
            "knowledge_bases": policy.knowledge_bases,
            "write_actions": policy.write_actions,
            "web": {"enabled": policy.web.enabled, "domains": policy.web.domains},
        },
    )


lambda_handler = http_handler(app, services)
