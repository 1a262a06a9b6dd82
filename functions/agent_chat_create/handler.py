"""POST /api/v1/agent/chats: a new chat of the caller's own (spec 001 3.1.1)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("chat")


@app.post("/api/v1/agent/chats")
def create_chat_route():  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import IDEMPOTENCY_HEADER, create_chat, idempotency_key
    from citegate.agents.schemas.chats import ChatCreateBody

    call = authorized(app)
    body = parse_body(app, ChatCreateBody, allow_empty=True)
    key = idempotency_key(app.current_event.headers.get(IDEMPOTENCY_HEADER))
    chat = create_chat(services(), call.principal, body.title, key)
    return json_response(201, chat.model_dump())


lambda_handler = http_handler(app, services, family="chat")
