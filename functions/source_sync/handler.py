"""POST /v1/kb/{kb_id}/sources/{source_id}/sync: sync now; the run with its counts (409
sync_in_progress while another sync of the source runs). New and changed documents are queued
for ingestion (their tasks are in the run); deletions are done when it answers."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/sources/<source_id>/sync")
def sync(kb_id: str, source_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    assert call.kb is not None
    run = services().source_service.sync(call.kb, source_id, trigger="api", caller=call.principal.id)
    return json_response(200, run.model_dump())  # a failed run too: its record says why


lambda_handler = http_handler(app, services)
