"""GET /admin/policies: every policy of the caller's tenant."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/admin/policies")
def list_policies():  # type: ignore[no-untyped-def]
    call = authorized(app)
    policies = [p.model_dump() for p in services().policies.all() if p.tenant_id == call.principal.tenant_id]
    return json_response(200, {"policies": policies})


lambda_handler = http_handler(app, services)
