"""POST /v1/kb/{kb_id}/documents: accept a document for asynchronous ingestion (202 with a task)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/documents")
def ingest(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.schemas.documents import IngestRequest

    s = services()
    call = authorized(app)
    assert call.kb is not None
    accepted = s.ingestion.submit(call.kb, parse_body(app, IngestRequest), call.principal)
    return json_response(
        202,
        {
            "task_id": accepted.task.task_id,
            "document_id": accepted.document_id,
            "status": accepted.task.status,
        },
        headers={"Location": f"/v1/tasks/{accepted.task.task_id}"},
    )


lambda_handler = http_handler(app, services)
