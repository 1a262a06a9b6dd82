"""GET /api/v1/agent/models: the chat models the caller may pick (spec 001's model switching)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver("chat")


@app.get("/api/v1/agent/models")
def list_models_route():  # type: ignore[no-untyped-def]
    from citegate.agents.chats.service import list_models

    call = authorized(app)
    return json_response(200, list_models(services(), call).model_dump())


lambda_handler = http_handler(app, services, family="chat")
