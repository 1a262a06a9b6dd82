"""GET /api/v1/agent/models: the chat models the caller may pick (spec 001's model switching)."""

from citegate.container import services
from citegate.http.api import authorized, http_handler, json_response, make_resolver

app = make_resolver("chat")


@app.get("/api/v1/agent/models")
def list_models_route():  # type: ignore[no-untyped-def]
    from citegate.chats.service import list_models

    call = authorized(app)
    return json_response(200, list_models(services(), call).model_dump())


lambda_handler = http_handler(app, family="chat")
