"""GET /v1/kb/{kb_id}."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>")
def get(kb_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    # The policy check may use a copy a few seconds old; the caller is shown the current counts.
    kb = services().kbs.get(kb_id, tenant_id=call.principal.tenant_id)
    return json_response(200, kb.model_dump())


lambda_handler = http_handler(app, services)
