"""DELETE /v1/kb/{kb_id}/sources/{source_id}: the source, its runs and (unless ?keep_documents=true)
the documents it brought, their chunks with them."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, query_param
from citegate.container import services

app = make_resolver()


@app.delete("/v1/kb/<kb_id>/sources/<source_id>")
def delete(kb_id: str, source_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    assert call.kb is not None
    keep = (query_param(app, "keep_documents") or "").lower() in ("1", "true", "yes")
    return json_response(200, services().source_service.delete(call.kb, source_id, keep_documents=keep))


lambda_handler = http_handler(app, services)
