"""GET /admin/policies/{principal_key}."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services
from citegate.platform.errors import NotFound

app = make_resolver()


@app.get("/admin/policies/<principal_key>")
def get_policy(principal_key: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    policy = services().policies.find(principal_key)
    if policy is None or policy.tenant_id != call.principal.tenant_id:
        raise NotFound(f"no policy for {principal_key!r}", details={"principal_key": principal_key})
    return json_response(200, policy.model_dump())


lambda_handler = http_handler(app, services)
