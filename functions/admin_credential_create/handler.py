"""POST /admin/agents/{agent_id}/credentials: issue an agent token or caller agent key (shown once)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/admin/agents/<agent_id>/credentials")
def issue(agent_id: str):  # type: ignore[no-untyped-def]
    from citegate.governance.schemas import CredentialRequest

    call = authorized(app)
    request = parse_body(app, CredentialRequest, allow_empty=True)
    issued = services().policies.issue_credential(
        agent_id, call.principal.tenant_id, request.kind, request.description
    )
    return json_response(201, issued)


lambda_handler = http_handler(app, services)
