"""POST /agent/tools/search: ranked passages with citations, in the caller's scope."""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("answer")


@app.post("/agent/tools/search")
def search_tool():  # type: ignore[no-untyped-def]
    from citegate.agents import tools as agent_tools
    from citegate.answers.schemas.answer import SearchBody
    from citegate.governance.calls import current_call

    body = parse_body(app, SearchBody)
    call = govern(app, requested=body.scope)
    current_call().note(purpose=body.caller.purpose)
    return json_response(200, agent_tools.search(services(), call, body.query, body.topK))


lambda_handler = http_handler(app, services, family="answer")
