"""POST /agent/tools/ask: the same engine as /answer/ask; citations are always required."""

from citegate.api.http import govern, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver("answer")


@app.post("/agent/tools/ask")
def ask_tool():  # type: ignore[no-untyped-def]
    from citegate.answers.answer_api import answer_question
    from citegate.answers.schemas.answer import AskBody
    from citegate.governance.calls import current_call

    body = parse_body(app, AskBody)
    call = govern(app, requested=body.scope)
    current_call().note(purpose=body.caller.purpose)
    asked = answer_question(services(), call, body.question, top_k=body.topK, require_citations=True)
    return json_response(200, asked.result.model_dump())


lambda_handler = http_handler(app, services, family="answer")
