"""GET /v1/kb/{kb_id}/documents: the documents of the knowledge base inside the caller's scope."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/documents")
def list_documents(kb_id: str):  # type: ignore[no-untyped-def]
    s = services()
    scope = authorized(app).search_scope(frozenset({kb_id})).to_filter()
    documents = sorted(s.documents.list_in(kb_id, scope), key=lambda d: d.source_name)
    return json_response(200, {"kb_id": kb_id, "documents": [d.model_dump() for d in documents]})


lambda_handler = http_handler(app, services)
