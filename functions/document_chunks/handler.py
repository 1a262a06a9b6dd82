"""GET /v1/kb/{kb_id}/documents/{document_id}/chunks: a document's parents and children (with
their ref ids), if the document is inside the caller's scope (else 404 document_not_found)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/documents/<document_id>/chunks")
def get_document_chunks(kb_id: str, document_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.document_chunks import document_chunks

    scope = authorized(app).search_scope(frozenset({kb_id})).to_filter()
    return json_response(200, document_chunks(services(), kb_id, document_id, scope))


lambda_handler = http_handler(app, services)
