"""GET /v1/models: the knowledge bases the caller may ask, as OpenAI-compatible models."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver("openai")


@app.get("/v1/models")
def list_models():  # type: ignore[no-untyped-def]
    from citegate.answers.conversation import askable_models
    from citegate.api.openai_compat import model_list

    return json_response(200, model_list(askable_models(services(), authorized(app))))


lambda_handler = http_handler(app, services, family="openai")
