"""POST /v1/chat/completions: OpenAI's Chat Completions protocol, answered with citations
(citegate.api.openai_compat); `stream: true` streams chunks as server-sent events.

In AWS this folder is also the streaming twin (function URLs), which serves GET /v1/models as well
(routes.Route.stream_twin), so an OpenAI client's one `base_url` both lists models and streams;
behind the HTTP API, GET /v1/models goes to functions/openai_models."""

from citegate.api.http import authorized, json_response, make_resolver, parse_body
from citegate.api.streaming import sse_handler, stream_response
from citegate.container import services

app = make_resolver("openai")


@app.post("/v1/chat/completions")
def chat_completions():  # type: ignore[no-untyped-def]
    from citegate.api.openai_compat import ChatCompletionRequest, Exchange, base_url_of, failure_events
    from citegate.governance.calls import current_call

    call = authorized(app)
    request = parse_body(app, ChatCompletionRequest)
    exchange = Exchange(
        services(),
        call,
        request,
        request_id=current_call().request_id,
        base_url=base_url_of(app.current_event.headers or {}),
    )
    if request.stream:
        return stream_response(exchange.chunks(), failure_events)
    return json_response(200, exchange.completion())


@app.get("/v1/models")
def list_models():  # type: ignore[no-untyped-def]
    from citegate.api.openai_compat import models_reply

    return json_response(200, models_reply(services(), authorized(app)))


lambda_handler = sse_handler(app, services, family="openai")
