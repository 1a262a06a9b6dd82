"""POST /v1/kb/{kb_id}/resolve_refs: ref ids to citations; refs not in this knowledge base are missing."""

from citegate.container import services
from citegate.http.api import http_handler, json_response, make_resolver, parse_body

app = make_resolver()


@app.post("/v1/kb/<kb_id>/resolve_refs")
def resolve_route(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.citations import resolve_refs
    from citegate.models.retrieval import ResolveRefsRequest

    s = services()
    request = parse_body(app, ResolveRefsRequest)
    return json_response(200, resolve_refs(s, [kb_id], request.ref_ids).model_dump())


lambda_handler = http_handler(app)
