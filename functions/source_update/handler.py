"""PATCH /v1/kb/{kb_id}/sources/{source_id}: rename, new settings (same kind), schedule, on or off."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.patch("/v1/kb/<kb_id>/sources/<source_id>")
def update(kb_id: str, source_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.sources.model import UpdateSourceRequest

    call = authorized(app)
    assert call.kb is not None
    source = services().source_service.update(call.kb, source_id, parse_body(app, UpdateSourceRequest))
    return json_response(200, source.public())


lambda_handler = http_handler(app, services)
