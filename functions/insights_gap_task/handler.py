"""POST /v1/insights/gaps/{group_id}/improvement_task {"title"?, "description"?, "idempotencyKey"?}:
open the improvement task of a gap group's representative question, through the same deduplicated
records as POST /agent/tools/create_improvement_task (a second call counts on the open task)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body, request_id
from citegate.container import services

app = make_resolver()


@app.post("/v1/insights/gaps/<group_id>/improvement_task")
def open_group_task(group_id: str):  # type: ignore[no-untyped-def]
    from citegate.api.insights import TaskBody
    from citegate.insights.service import open_task

    call = authorized(app)
    body = parse_body(app, TaskBody, allow_empty=True)
    result = open_task(
        services(),
        call,
        group_id,
        request_id(app),
        title=body.title,
        description=body.description,
        idempotency_key=body.idempotencyKey,
    )
    return json_response(200, result)


lambda_handler = http_handler(app, services)
