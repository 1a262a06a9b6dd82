"""GET /v1/models: the knowledge bases and answer scopes the caller may ask, as OpenAI-compatible
models. In AWS the chat completions' streaming twin serves it too (its handler declares it)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver("openai")


@app.get("/v1/models")
def list_models():  # type: ignore[no-untyped-def]
    from citegate.api.openai_compat import models_reply

    return json_response(200, models_reply(services(), authorized(app)))


lambda_handler = http_handler(app, services, family="openai")
