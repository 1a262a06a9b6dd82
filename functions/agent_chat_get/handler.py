"""GET /api/v1/agent/chats/{chat_id}: one of the caller's chats with its messages (spec 001 3.1.3)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver("chat")


@app.get("/api/v1/agent/chats/<chat_id>")
def get_chat_route(chat_id: str):  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import chat_detail

    call = authorized(app)
    return json_response(200, chat_detail(services(), call.principal, chat_id))


lambda_handler = http_handler(app, services, family="chat")
