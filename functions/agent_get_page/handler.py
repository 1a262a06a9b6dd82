"""POST /agent/tools/get_page: a document by path (or the one path of the scope) and version, with its
headings and anchors."""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("answer")


@app.post("/agent/tools/get_page")
def get_page_tool():  # type: ignore[no-untyped-def]
    from citegate.agents import tools as agent_tools
    from citegate.answers.schemas.answer import GetPageBody

    body = parse_body(app, GetPageBody)
    call = govern(app, requested=body.scope)
    return json_response(200, agent_tools.get_page(services(), call, body.path, body.version, body.scope))


lambda_handler = http_handler(app, services, family="answer")
