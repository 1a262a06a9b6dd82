"""POST /api/v1/web/search: web search through the configured provider (spec 001 3.2.1)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("chat")  # spec 001's error codes


@app.post("/api/v1/web/search")
def web_search_route():  # type: ignore[no-untyped-def]
    from citegate.governance.calls import current_call
    from citegate.web.schemas import WebSearchRequest
    from citegate.web.service import require_web

    call = authorized(app)
    require_web(call.policy)
    request = parse_body(app, WebSearchRequest)
    record = current_call()
    found = services().web.search(call.principal, call.policy, request, record.source_ip)
    record.note(query=request.query, result_count=len(found.results))
    return json_response(200, found.model_dump(exclude_unset=True))  # read fields only with include_content


lambda_handler = http_handler(app, services, family="chat")
