"""GET /v1/kb/{kb_id}/documents/{document_id}: one document, if inside the caller's scope (else
404 document_not_found, the same answer as for a document that does not exist)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/documents/<document_id>")
def get_document(kb_id: str, document_id: str):  # type: ignore[no-untyped-def]
    s = services()
    scope = authorized(app).search_scope(frozenset({kb_id})).to_filter()
    return json_response(200, s.documents.get_in(kb_id, document_id, scope).model_dump())


lambda_handler = http_handler(app, services)
