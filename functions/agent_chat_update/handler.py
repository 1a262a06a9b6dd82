"""PATCH /api/v1/agent/chats/{chat_id}: rename one of the caller's chats."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("chat")


@app.patch("/api/v1/agent/chats/<chat_id>")
def rename_chat_route(chat_id: str):  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import rename_chat
    from citegate.agents.schemas.chats import ChatRenameBody

    call = authorized(app)
    body = parse_body(app, ChatRenameBody)
    return json_response(200, rename_chat(services(), call.principal, chat_id, body.title).model_dump())


lambda_handler = http_handler(app, services, family="chat")
