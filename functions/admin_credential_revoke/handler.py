"""DELETE /admin/agents/{agent_id}/credentials/{credential_id}: revoke at once."""

from citegate.api.http import http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.delete("/admin/agents/<agent_id>/credentials/<credential_id>")
def revoke(agent_id: str, credential_id: str):  # type: ignore[no-untyped-def]
    return json_response(200, services().policies.revoke_credential(agent_id, credential_id))


lambda_handler = http_handler(app, services)
