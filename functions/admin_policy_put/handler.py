"""PUT /admin/policies/{principal_key}: create or replace a principal's policy in the caller's tenant.

The bootstrap service principal (the spec 004 token, `service:<CITEGATE_SERVICE_PRINCIPAL>`) must
keep the admin tool and the admin write action: a PUT that would take them away is refused with
409 `conflict`, so no call can lock every administrator out (docs/deploy.md: recovering policies).
"""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services
from citegate.platform.errors import Conflict, Forbidden

app = make_resolver()


@app.put("/admin/policies/<principal_key>")
def put_policy(principal_key: str):  # type: ignore[no-untyped-def]
    from citegate.governance.policy.model import Policy, PolicyUpdate
    from citegate.governance.policy.store import bootstrap_key, keeps_admin

    call = authorized(app)
    body = parse_body(app, PolicyUpdate)
    tenant = body.tenant_id or call.principal.tenant_id
    if tenant != call.principal.tenant_id:
        raise Forbidden("a policy can only be written in the caller's own tenant")
    policy = Policy.model_validate({**body.model_dump(), "principal_key": principal_key, "tenant_id": tenant})
    s = services()
    bootstrap = bootstrap_key(s.settings.service_principal_id)
    if principal_key == bootstrap and not keeps_admin(policy):
        raise Conflict(
            f"{bootstrap} is the bootstrap service principal: its policy must keep the 'admin' tool "
            "(or '*') and the 'admin' write action, or no one could administer policies again",
            details={
                "reason": "bootstrap_admin_required",
                "principal_key": bootstrap,
                "required": {"tools": ["admin"], "write_actions": ["admin"]},
            },
        )
    return json_response(200, s.policies.put(policy).model_dump())


lambda_handler = http_handler(app, services)
