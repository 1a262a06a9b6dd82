"""GET /v1/kb/{kb_id}/sources: the knowledge base's sources, each with its latest run."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/sources")
def list_sources(kb_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    assert call.kb is not None
    sources = services().source_service.list(call.kb)
    return json_response(200, {"kb_id": kb_id, "sources": [s.public() for s in sources]})


lambda_handler = http_handler(app, services)
