"""GET /admin/feedback?kind=feedback|improvement_task&status=open|closed&limit=: the caller's
tenant's feedback records and improvement tasks, most recently reported first."""

from typing import cast, get_args

from citegate.api.http import authorized, http_handler, json_response, make_resolver, query_param
from citegate.container import services
from citegate.platform.errors import InvalidRequest

app = make_resolver()


@app.get("/admin/feedback")
def list_feedback():  # type: ignore[no-untyped-def]
    from citegate.answers.feedback import feedback_service
    from citegate.answers.schemas.feedback import Kind, Status

    call = authorized(app)
    kind = query_param(app, "kind") or None
    status = query_param(app, "status") or None
    if kind is not None and kind not in get_args(Kind):
        raise InvalidRequest("kind must be feedback or improvement_task", details={"field": "kind"})
    if status is not None and status not in get_args(Status):
        raise InvalidRequest("status must be open or closed", details={"field": "status"})
    try:
        limit = int(query_param(app, "limit") or 100)
    except ValueError as error:
        raise InvalidRequest("limit must be an integer", details={"field": "limit"}) from error
    if not 1 <= limit <= 1000:
        raise InvalidRequest("limit must be between 1 and 1000", details={"field": "limit"})
    records = feedback_service(services()).list(
        call.principal.tenant_id, cast("Kind | None", kind), cast("Status | None", status), limit
    )
    return json_response(200, {"records": [r.model_dump(mode="json") for r in records]})


lambda_handler = http_handler(app, services)
