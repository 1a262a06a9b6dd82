"""PUT /admin/policies/{principal_key}: create or replace a principal's policy in the caller's tenant."""

from citegate.container import services
from citegate.errors import Forbidden
from citegate.http.api import authorized, http_handler, json_response, make_resolver, parse_body

app = make_resolver()


@app.put("/admin/policies/<principal_key>")
def put_policy(principal_key: str):  # type: ignore[no-untyped-def]
    from citegate.policy.model import Policy, PolicyUpdate

    call = authorized(app)
    body = parse_body(app, PolicyUpdate)
    tenant = body.tenant_id or call.principal.tenant_id
    if tenant != call.principal.tenant_id:
        raise Forbidden("a policy can only be written in the caller's own tenant")
    policy = Policy.model_validate({**body.model_dump(), "principal_key": principal_key, "tenant_id": tenant})
    return json_response(200, services().policies.put(policy).model_dump())


lambda_handler = http_handler(app)
