"""POST /v1/insights/gaps/{group_id}/fix {"fixed": true, "note"?, "recheck": true}: mark a gap group
fixed after the documents changed; its most frequent questions are asked again (in the caller's
scope, not recorded as new questions) and later questions are tracked against the mark."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/insights/gaps/<group_id>/fix")
def fix_group(group_id: str):  # type: ignore[no-untyped-def]
    from citegate.api.insights import FixBody
    from citegate.insights.service import mark_fixed

    call = authorized(app)
    body = parse_body(app, FixBody, allow_empty=True)
    result = mark_fixed(services(), call, group_id, fixed=body.fixed, note=body.note, recheck=body.recheck)
    return json_response(200, result)


lambda_handler = http_handler(app, services)
