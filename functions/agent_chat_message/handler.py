"""POST /api/v1/agent/chats/{chat_id}/messages: a turn, streamed as SSE or one JSON reply (3.1.4)."""

from citegate.api.http import authorized, json_response, make_resolver, parse_body
from citegate.api.streaming import sse_handler, stream_response
from citegate.container import services

app = make_resolver("chat")


@app.post("/api/v1/agent/chats/<chat_id>/messages")
def send_message_route(chat_id: str):  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import IDEMPOTENCY_HEADER, idempotency_key, start_turn
    from citegate.agents.schemas.chats import MessageBody

    call = authorized(app)
    body = parse_body(app, MessageBody)
    key = idempotency_key(app.current_event.headers.get(IDEMPOTENCY_HEADER))
    # An unknown model or chat is refused here, as a JSON error, before any stream starts.
    turn = start_turn(services(), call, chat_id, body, key)
    if body.stream:
        return stream_response(turn.events(), turn.failure_frames, on_disconnect=turn.interrupted)
    return json_response(200, turn.reply().model_dump())


lambda_handler = sse_handler(app, services, family="chat")
