"""POST /v1/kb/{kb_id}/sources/{source_id}/sync: 202 with the run, `queued` (409 sync_in_progress
while another sync of the source is queued or running). The ingestion queue hands the run to the
sync function, which lists the source, queues new and changed documents and deletes what is gone;
the run's link (`GET .../runs/{run_id}`) says when it ends and with what counts."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/sources/<source_id>/sync")
def sync(kb_id: str, source_id: str):  # type: ignore[no-untyped-def]
    call = authorized(app)
    assert call.kb is not None
    run = services().source_service.request_sync(call.kb, source_id, trigger="api", caller=call.principal.id)
    link = f"/v1/kb/{kb_id}/sources/{source_id}/runs/{run.run_id}"
    return json_response(202, {**run.model_dump(), "links": {"self": link}}, headers={"Location": link})


lambda_handler = http_handler(app, services)
