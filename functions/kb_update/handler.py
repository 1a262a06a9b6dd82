"""PATCH /v1/kb/{kb_id}: rename, describe, or move between working and approved."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.patch("/v1/kb/<kb_id>")
def update(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.bases import update_kb
    from citegate.knowledge.schemas.kb import UpdateKbRequest

    call = authorized(app)
    kb = update_kb(services(), kb_id, parse_body(app, UpdateKbRequest), call.principal)
    return json_response(200, kb.model_dump())


lambda_handler = http_handler(app, services)
