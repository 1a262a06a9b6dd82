"""DELETE /api/v1/agent/chats/{chat_id}: one of the caller's chats, with all its messages."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver("chat")


@app.delete("/api/v1/agent/chats/<chat_id>")
def delete_chat_route(chat_id: str):  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import delete_chat

    call = authorized(app)
    delete_chat(services(), call.principal, chat_id)
    return json_response(200, {"id": chat_id, "deleted": True})


lambda_handler = http_handler(app, services, family="chat")
