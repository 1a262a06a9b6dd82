"""POST /admin/feedback/{record_id}/close: close an open record (and its GitHub issue, if any).

The closed record keeps its history under a new id; the next report of the same gap opens a new
record instead of reviving this one.
"""

from urllib.parse import unquote

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/admin/feedback/<record_id>/close")
def close_feedback(record_id: str):  # type: ignore[no-untyped-def]
    from citegate.answers.feedback import feedback_service
    from citegate.answers.schemas.feedback import CloseBody

    call = authorized(app)
    body = parse_body(app, CloseBody, allow_empty=True)
    principal = call.principal
    record = feedback_service(services()).close(
        principal.tenant_id, unquote(record_id), body.resolution, closed_by=f"{principal.type}:{principal.id}"
    )
    return json_response(200, record.model_dump(mode="json"))


lambda_handler = http_handler(app, services)
