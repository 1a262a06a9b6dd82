"""GET /v1/kb/{kb_id}/sources/{source_id}/runs: the source's latest sync runs, newest first."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, query_param
from citegate.container import services

app = make_resolver()


@app.get("/v1/kb/<kb_id>/sources/<source_id>/runs")
def runs(kb_id: str, source_id: str):  # type: ignore[no-untyped-def]
    from citegate.platform.errors import InvalidRequest

    call = authorized(app)
    assert call.kb is not None
    raw = query_param(app, "limit") or "20"
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise InvalidRequest("limit must be a number from 1 to 100", details={"field": "limit"})
    found = services().source_service.runs(call.kb, source_id, int(raw))
    return json_response(
        200, {"kb_id": kb_id, "source_id": source_id, "runs": [r.model_dump() for r in found]}
    )


lambda_handler = http_handler(app, services)
