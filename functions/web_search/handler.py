"""POST /api/v1/web/search: web search through the configured provider (spec 001 3.2.1)."""

from citegate.container import services
from citegate.governance import current_call
from citegate.http.api import govern, http_handler, json_response, parse_body
from citegate.models.web import WebSearchRequest
from citegate.web.service import require_web, web_resolver, web_service

app = web_resolver()


@app.post("/api/v1/web/search")
def web_search_route():  # type: ignore[no-untyped-def]
    call = govern(app, "web_search")
    require_web(call.policy)
    request = parse_body(app, WebSearchRequest)
    record = current_call()
    found = web_service(services()).search(call.principal, call.policy, request, record.source_ip)
    record.note(query=request.query, result_count=len(found.results))
    return json_response(200, found.model_dump())


lambda_handler = http_handler(app, family="chat")
