"""POST /v1/kb/{kb_id}/retrieve: hybrid retrieval in one knowledge base (ref_id, chunk_text, score)."""

from citegate.api.http import authorized, http_handler, json_response, make_resolver, parse_body
from citegate.container import services

app = make_resolver()


@app.post("/v1/kb/<kb_id>/retrieve")
def retrieve_route(kb_id: str):  # type: ignore[no-untyped-def]
    from citegate.governance.calls import current_call
    from citegate.knowledge.retrieval import retrieve
    from citegate.knowledge.schemas.retrieval import RetrieveRequest

    s = services()
    call = authorized(app)
    request = parse_body(app, RetrieveRequest)
    scope = call.search_scope(frozenset({kb_id}), request.source_names)
    found = retrieve(s, scope, request.query, top_k=request.top_k, score_threshold=request.score_threshold)
    refs = [h.chunk.ref_id for h in found.hits]
    current_call().note(query=request.query, result_count=len(refs), retrieved=refs)
    # In rank order: by `rank_score` (the fusion's, relative to this query); `score` is the absolute
    # relevance estimate, so a later hit may have a higher one (docs/api.md says why).
    results = [
        {
            "ref_id": h.chunk.ref_id,
            "chunk_text": h.chunk.text,
            "score": round(h.score, 6),
            "rank_score": round(h.fused_score, 6) if h.fused_score is not None else None,
        }
        for h in found.hits
    ]
    return json_response(200, {"results": results, "stats": found.stats})


lambda_handler = http_handler(app, services)
