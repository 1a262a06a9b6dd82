"""POST /api/v1/web/read: read pages as Markdown, several concurrently (spec 001 3.2.2)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("chat")  # spec 001's error codes


@app.post("/api/v1/web/read")
def web_read_route():  # type: ignore[no-untyped-def]
    from citegate.governance.calls import current_call
    from citegate.web.schemas import WebReadRequest
    from citegate.web.service import require_web

    call = authorized(app)
    require_web(call.policy)
    request = parse_body(app, WebReadRequest)
    read = services().web.read(call.policy, request)
    current_call().note(query=" ".join(request.url_list)[:1000], result_count=read.successful)
    return json_response(200, read.model_dump(exclude_none=True))


lambda_handler = http_handler(app, services, family="chat")
