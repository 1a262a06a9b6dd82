"""POST /v1/kb/{kb_id}/reindex: rebuild a knowledge base's index from its stored raw documents."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/reindex")
def reindex(kb_id: str):  # type: ignore[no-untyped-def]
    s = services()
    call = authorized(app)
    assert call.kb is not None
    task = s.ingestion.reindex(call.kb)
    body = {
        "task_id": task.task_id,
        "kb_id": kb_id,
        "documents": len(task.children or []),
        "status": task.status,
    }
    return json_response(202, body, headers={"Location": f"/v1/tasks/{task.task_id}"})


lambda_handler = http_handler(app, services)
