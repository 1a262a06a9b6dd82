"""POST /v1/kb/{kb_id}/uploads: a presigned S3 PUT for a large document, then ingest it by s3_key."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/uploads")
def create_upload(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.schemas.documents import UploadRequest

    s = services()
    call = authorized(app)
    assert call.kb is not None
    return json_response(201, s.ingestion.create_upload(call.kb, parse_body(app, UploadRequest)))


lambda_handler = http_handler(app, services)
