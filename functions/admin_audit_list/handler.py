"""GET /admin/audit?caller=agent:x&since=...&until=...&limit=: the caller's tenant's audit records."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, query_param
from citegate.container import services
from citegate.platform.errors import InvalidRequest

app = make_resolver()


@app.get("/admin/audit")
def list_audit():  # type: ignore[no-untyped-def]
    call = authorized(app)
    try:
        limit = int(query_param(app, "limit") or 100)
    except ValueError as error:
        raise InvalidRequest("limit must be an integer", details={"field": "limit"}) from error
    if not 1 <= limit <= 1000:
        raise InvalidRequest("limit must be between 1 and 1000", details={"field": "limit"})
    records = services().audit.list(
        call.principal.tenant_id,
        caller=query_param(app, "caller"),
        since=query_param(app, "since"),
        until=query_param(app, "until"),
        limit=limit,
    )
    return json_response(200, {"records": [r.model_dump() for r in records]})


lambda_handler = http_handler(app, services)
