"""DELETE /v1/kb/{kb_id}/documents/{document_id}: no chunk, parent, file or record is left behind."""

from citegate.api.http import http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.delete("/v1/kb/<kb_id>/documents/<document_id>")
def delete_document(kb_id: str, document_id: str):  # type: ignore[no-untyped-def]
    s = services()
    return json_response(200, s.ingestion.delete_document(kb_id, document_id))


lambda_handler = http_handler(app, services)
