"""GET /admin/agents/{agent_id}/credentials: the agent's credentials (never their secrets)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/admin/agents/<agent_id>/credentials")
def list_credentials(agent_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    items = [
        c
        for c in services().policies.list_credentials(agent_id)
        if c["tenant_id"] == call.principal.tenant_id
    ]
    return json_response(200, {"agent_id": agent_id, "credentials": items})


lambda_handler = http_handler(app, services)
