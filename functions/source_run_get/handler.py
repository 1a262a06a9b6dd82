"""GET /v1/kb/{kb_id}/sources/{source_id}/runs/{run_id}: one sync run (a sync request's link):
`queued`, `running`, then `succeeded` or `failed` with its counts, or `abandoned`."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/sources/<source_id>/runs/<run_id>")
def run(kb_id: str, source_id: str, run_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    assert call.kb is not None
    found = services().source_service.run(call.kb, source_id, run_id)
    link = f"/v1/kb/{kb_id}/sources/{source_id}/runs/{run_id}"
    return json_response(200, {**found.model_dump(), "links": {"self": link}})


lambda_handler = http_handler(app, services)
