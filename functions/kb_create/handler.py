"""POST /v1/kb: create a knowledge base (409 kb_exists when the id is taken)."""

from citegate.container import services
from citegate.http.api import authorized, http_handler, json_response, make_resolver, parse_body

app = make_resolver()


@app.post("/v1/kb")
def create():  # type: ignore[no-untyped-def]
    from citegate.knowledge_bases import create_kb
    from citegate.models.kb import CreateKbRequest

    call = authorized(app)
    kb = create_kb(services(), parse_body(app, CreateKbRequest), call.principal)
    return json_response(201, kb.model_dump())


lambda_handler = http_handler(app)
