"""POST /agent/tools/search: ranked passages with citations, in the caller's scope."""

from citegate.container import services
from citegate.http.api import govern, http_handler, json_response, make_resolver, parse_body

app = make_resolver("answer")


@app.post("/agent/tools/search")
def search_tool():  # type: ignore[no-untyped-def]
    from citegate import agent_tools
    from citegate.governance import current_call
    from citegate.models.answer import SearchBody

    body = parse_body(app, SearchBody)
    call = govern(app, requested=body.scope)
    current_call().note(purpose=body.caller.purpose)
    return json_response(200, agent_tools.search(services(), call, body.query, body.topK))


lambda_handler = http_handler(app, family="answer")
