"""GET /v1/kb/{kb_id}/documents/{document_id}."""

from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver

app = make_resolver()


@app.get("/v1/kb/<kb_id>/documents/<document_id>")
def get_document(kb_id: str, document_id: str):  # type: ignore[no-untyped-def]
    s = services()
    return json_response(200, s.documents.get(kb_id, document_id).model_dump())


lambda_handler = http_handler(app)
