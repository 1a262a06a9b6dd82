"""POST /v1/kb/{kb_id}/resolve_refs: ref ids to citations; refs outside this knowledge base or the
caller's scope (projects, paths, versions, files) are missing, like unknown ones."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/resolve_refs")
def resolve_route(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.knowledge.citations import resolve_refs
    from citegate.knowledge.schemas.retrieval import ResolveRefsRequest

    s = services()
    scope = authorized(app).search_scope(frozenset({kb_id})).to_filter()
    request = parse_body(app, ResolveRefsRequest)
    return json_response(200, resolve_refs(s, scope, request.ref_ids).model_dump())


lambda_handler = http_handler(app, services)
