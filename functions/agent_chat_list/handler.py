"""GET /api/v1/agent/chats: the caller's chats, most recently updated first (spec 001 3.1.2)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, query_param
from citegate.container import services

app = make_resolver("chat")


@app.get("/api/v1/agent/chats")
def list_chats_route():  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import list_chats, list_limit

    call = authorized(app)
    limit = list_limit(query_param(app, "limit"))
    return json_response(200, list_chats(services(), call.principal, limit).model_dump())


lambda_handler = http_handler(app, services, family="chat")
