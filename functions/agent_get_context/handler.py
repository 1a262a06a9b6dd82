"""POST /agent/tools/get_context: a ContextPack for a task within a token budget."""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("answer")


@app.post("/agent/tools/get_context")
def get_context_tool():  # type: ignore[no-untyped-def]
    from citegate.agents import tools as agent_tools
    from citegate.answers.schemas.answer import GetContextBody

    body = parse_body(app, GetContextBody)
    call = govern(app, requested=body.scope)
    return json_response(200, agent_tools.get_context(services(), call, body.task, body.tokenBudget))


lambda_handler = http_handler(app, services, family="answer")
