"""POST /v1/kb: create a knowledge base (409 kb_exists when the id is taken)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb")
def create():  # type: ignore[no-untyped-def]
    from citegate.knowledge.bases import create_kb
    from citegate.knowledge.schemas.kb import CreateKbRequest

    call = authorized(app)
    kb = create_kb(services(), parse_body(app, CreateKbRequest), call.principal)
    return json_response(201, kb.model_dump())


lambda_handler = http_handler(app, services)
