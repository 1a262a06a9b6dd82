"""GET /v1/kb/{kb_id}/sources/{source_id}: one source, its settings and latest run."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/sources/<source_id>")
def get_source(kb_id: str, source_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    assert call.kb is not None
    return json_response(200, services().source_service.get(call.kb, source_id).public())


lambda_handler = http_handler(app, services)
